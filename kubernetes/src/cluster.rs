//! What the extender knows of the cluster: the nodes and the pods bound to them, kept as
//! gpol's records (mapped by [`crate::nodes`] and [`crate::pods`]) and as a runtime
//! [`Scheduler`] built from them. Pod events change the scheduler in place; a node
//! change or a new policy marks it stale, and it is built again when next asked.
//! A pod is asked about ([`Scheduler::ask`]): every node's verdict, nothing changed.
//!
//! `bind` reserves first ([`Cluster::reserve`]): the pod counts on its node from then on,
//! as kube-scheduler's own cache assumes it, so that binds in flight at once and the
//! filters asked meanwhile all see it; a bind that fails gives it back
//! ([`Cluster::release`]).

use crate::FieldError;
use crate::nodes::{self, MappedNode};
use crate::pods::{self, MappedPod, Phase};
use gpol_compiler::engine::CompiledPolicy;
use gpol_compiler::spec::{History, NodeSpec, domains_at};
use gpol_runtime::JobId;
use gpol_runtime::NodeId;
use gpol_runtime::NodeVerdict;
use gpol_runtime::account::Account;
use gpol_runtime::{Found, Scheduler, WallClock, explain};
use rustc_hash::FxHashMap;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The most nodes the extender keeps (and the most a request may name).
pub const MAX_NODES: usize = gpol_compiler::limits::MAX_NODES as usize;
/// The most bound pods the extender keeps.
pub const MAX_PODS: usize = 1_000_000;

/// The nodes and bound pods, and the scheduler built from them.
/// Sent between the server's threads (behind a mutex).
pub struct Cluster {
    policy: CompiledPolicy,
    /// The policy's file as the decision log names it (`sha256:…`).
    policy_digest: String,
    nodes: BTreeMap<String, MappedNode>,
    /// Each node's `resourceVersion` as last mapped.
    versions: FxHashMap<String, String>,
    /// When nodes come whole in requests (no API server): when each was last sent, on the
    /// cluster's clock. `None` once the API server's watch feeds the nodes: then request
    /// bodies never change what the extender knows.
    sent: Option<FxHashMap<String, u64>>,
    /// The most nodes kept: [`MAX_NODES`] unless lowered.
    max_nodes: usize,
    /// Bound pods by UID, the ones `bind` has reserved a place for included.
    pods: HashMap<String, MappedPod>,
    /// Pods `bind` reserved a place for that the watch has not yet reported bound.
    assumed: HashMap<String, Assumption>,
    built: Option<Built>,
    /// Bound pods that did not fit on their node when last built (a stale cache).
    unplaced: usize,
    /// The clock rules read (`job.runtime`, `cluster.time`), in milliseconds.
    now_ms: u64,
    /// Clock zero in Unix time, to read pods' timestamps; `None`: they are not read.
    wall: Option<WallClock>,
    /// Counts every change to what decisions read (nodes, pods, the policy).
    generation: u64,
    last: Option<Last>,
}

// The server shares the cluster between threads: it must stay `Send`.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<Cluster>();
};

/// The scheduler and how its ids map to Kubernetes names.
struct Built {
    s: Scheduler,
    node_ids: FxHashMap<String, NodeId>,
    pod_jobs: HashMap<String, JobId>,
    job_pods: HashMap<JobId, String>,
}

/// Where a reserved pod's bind stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Assumption {
    /// The bind is in flight: the pod holds its place whatever a re-list says (the list
    /// may predate the pod), until the bind ends.
    Binding,
    /// The API server bound it; the watch has not reported it yet. Pending-pod events
    /// (the cards' write, seen before the Binding) do not free it; a deletion, the end
    /// of the pod or a re-list without it does.
    Bound,
}

/// How long a node sent whole in requests is kept after the last request that sent it
/// (`--no-api`): a node that left the cluster is forgotten then, and names sent once by
/// a careless or hostile client hold nothing for long.
pub const SENT_NODE_TTL_MS: u64 = 10 * 60 * 1000;

/// How long (in the cluster's clock) answers about a pod are given again unchanged.
const REUSE_MS: u64 = 1000;

/// The last pod worked out, and its answers.
struct Last {
    pod: Value,
    generation: u64,
    at_ms: u64,
    closed: Option<(Arc<str>, bool)>,
    tiers: usize,
    /// By node id; `None` for nodes not asked about.
    answers: Vec<Option<Answer>>,
}

/// One pod's answer over a list of nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    /// Why the pod cannot start anywhere, in words; `for_good` when no eviction helps.
    pub closed: Option<(Arc<str>, bool)>,
    /// Per node asked about, in order; `None` for a name given again (answered at its
    /// first place).
    pub nodes: Vec<Option<Answer>>,
    /// How many score tiers the policy ranks by.
    pub tiers: usize,
}

impl Evaluation {
    /// How two fitting nodes compare for the policy: `Less` when `a` is the better.
    pub fn compare(&self, a: &Rank, b: &Rank) -> std::cmp::Ordering {
        gpol_runtime::rank(&a.0, &b.0, self.tiers)
    }
}

/// One node's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// The pod fits; the node's place in the policy's ranking (a key: lower is better).
    Fits(Rank),
    /// It does not, and why; `for_good` when no eviction on the node helps.
    Fails { why: Arc<str>, for_good: bool },
}

/// A fitting node's score as the policy ranks it: tiers first, then the weighted sum.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rank(pub gpol_compiler::engine::NodeResult);

impl Cluster {
    pub fn new(policy: CompiledPolicy) -> Cluster {
        Cluster {
            policy,
            policy_digest: String::new(),
            nodes: BTreeMap::new(),
            versions: FxHashMap::default(),
            sent: Some(FxHashMap::default()),
            max_nodes: MAX_NODES,
            pods: HashMap::new(),
            assumed: HashMap::new(),
            built: None,
            unplaced: 0,
            now_ms: 0,
            wall: None,
            generation: 0,
            last: None,
        }
    }

    /// Serves another policy from now on.
    pub fn set_policy(&mut self, policy: CompiledPolicy) {
        self.policy = policy;
        self.changed();
    }

    pub fn policy(&self) -> &CompiledPolicy {
        &self.policy
    }

    /// Names the policy served by its file's digest (set with each policy), for the
    /// decision log.
    pub fn set_policy_digest(&mut self, digest: String) {
        self.policy_digest = digest;
    }

    pub fn policy_digest(&self) -> &str {
        &self.policy_digest
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// Bound pods that did not fit on their node at the last build.
    pub fn unplaced(&self) -> usize {
        self.unplaced
    }

    /// From now on the nodes come from the API server's watch: nodes sent in requests
    /// change nothing, and those kept from requests so far are dropped.
    pub fn watch_nodes(&mut self) {
        if let Some(sent) = self.sent.take() {
            for name in sent.keys() {
                self.versions.remove(name);
                self.nodes.remove(name);
            }
            self.changed();
        }
    }

    /// Keeps at most `n` nodes (at most [`MAX_NODES`]): a small extender's bound on what
    /// requests may make it hold.
    pub fn set_max_nodes(&mut self, n: usize) {
        self.max_nodes = n.min(MAX_NODES);
    }

    /// Whether request bodies bring nodes (no API server connected).
    pub fn nodes_from_requests(&self) -> bool {
        self.sent.is_some()
    }

    /// Whole Node objects sent in a request: kept (or brought up to date) when nodes come
    /// from requests, each until [`SENT_NODE_TTL_MS`] after it was last sent; when the
    /// extender holds its most nodes, the nodes sent longest ago make room. Ignored when
    /// the API server feeds the nodes. Returns the nodes that cannot be mapped, and why.
    pub fn apply_sent_nodes(&mut self, objects: &[Value]) -> FxHashMap<String, Arc<str>> {
        let mut bad = FxHashMap::default();
        let Some(sent) = &self.sent else { return bad };
        let now = self.now_ms;
        let names: rustc_hash::FxHashSet<&str> = objects.iter().filter_map(|o| nodes::name(o).ok()).collect();
        let mut expired: Vec<(u64, String)> =
            sent.iter().filter(|(n, _)| !names.contains(n.as_str())).map(|(n, &at)| (at, n.clone())).collect();
        let new = names.iter().filter(|n| !self.nodes.contains_key(**n)).count();
        let over = (self.nodes.len() + new).saturating_sub(self.max_nodes);
        expired.sort_unstable();
        let stale = expired.partition_point(|(at, _)| now.saturating_sub(*at) > SENT_NODE_TTL_MS);
        for (_, name) in expired.into_iter().take(stale.max(over)) {
            self.delete_node(&name);
        }
        for object in objects {
            let Ok(name) = nodes::name(object) else { continue };
            match self.apply_node(object) {
                Ok(_) => {
                    if let Some(sent) = &mut self.sent {
                        sent.insert(name.to_string(), now);
                    }
                }
                Err(e) => {
                    bad.insert(name.to_string(), Arc::from(e.to_string()));
                }
            }
        }
        bad
    }

    /// A node added or changed; `Ok(false)` when nothing gpol reads changed.
    pub fn apply_node(&mut self, object: &Value) -> Result<bool, FieldError> {
        // The API server changes a Node's resourceVersion with every change: one seen
        // already needs no mapping (requests sending whole Nodes repeat them every time).
        let version = object.pointer("/metadata/resourceVersion").and_then(Value::as_str).filter(|v| !v.is_empty());
        let name = nodes::name(object)?;
        if version.is_some() && self.versions.get(name).map(String::as_str) == version {
            return Ok(false);
        }
        let node = nodes::node(object)?;
        if let Some(v) = version {
            self.versions.insert(node.spec.name.clone(), v.to_string());
        }
        if self.nodes.get(&node.spec.name) == Some(&node) {
            return Ok(false);
        }
        if !self.nodes.contains_key(&node.spec.name) && self.nodes.len() >= self.max_nodes {
            return Err(FieldError::new("metadata.name", format!("more than {} nodes", self.max_nodes)));
        }
        self.nodes.insert(node.spec.name.clone(), node);
        self.changed();
        Ok(true)
    }

    pub fn delete_node(&mut self, name: &str) {
        self.versions.remove(name);
        if let Some(sent) = &mut self.sent {
            sent.remove(name);
        }
        if self.nodes.remove(name).is_some() {
            self.changed();
        }
    }

    /// Keeps exactly these nodes (a full list: a re-list of the watch, or the nodes of a
    /// request that sends whole Node objects).
    pub fn retain_nodes(&mut self, names: &std::collections::HashSet<&str>) {
        let before = self.nodes.len();
        self.nodes.retain(|n, _| names.contains(n.as_str()));
        self.versions.retain(|n, _| names.contains(n.as_str()));
        if self.nodes.len() != before {
            self.changed();
        }
    }

    /// A pod added or changed: bound pods hold their node's resources until they end.
    pub fn apply_pod(&mut self, object: &Value) -> Result<(), FieldError> {
        let classes = |c: &str| self.policy.policy.priority_classes.iter().any(|(n, _)| n == c);
        let pod = pods::pod(object, &classes)?;
        match pod.phase {
            Phase::Bound => {
                self.assumed.remove(&pod.uid);
                self.insert_bound(pod)
            }
            // An event from before the Binding (the cards' write): the place `bind`
            // reserved stands.
            Phase::Pending if self.assumed.contains_key(&pod.uid) => Ok(()),
            Phase::Pending | Phase::Ended => {
                self.delete_pod(&pod.uid);
                Ok(())
            }
        }
    }

    /// Counts a bound pod on its node (once: the same pod on the same node changes nothing).
    fn insert_bound(&mut self, pod: MappedPod) -> Result<(), FieldError> {
        if self.pods.get(&pod.uid).is_some_and(|p| p.node == pod.node) {
            return Ok(());
        }
        if !self.pods.contains_key(&pod.uid) && self.pods.len() >= MAX_PODS {
            return Err(FieldError::new("metadata.uid", format!("more than {MAX_PODS} bound pods")));
        }
        self.remove_pod(&pod.uid);
        self.generation += 1;
        if let Some(b) = &mut self.built
            && !start(b, &pod, self.wall)
        {
            self.unplaced += 1;
        }
        self.pods.insert(pod.uid.clone(), pod);
        Ok(())
    }

    /// Keeps exactly these bound pods (by UID): a re-list of the watch. Pods whose bind
    /// is in flight stay (the list may predate them).
    pub fn retain_pods(&mut self, uids: &std::collections::HashSet<String>) {
        let binding = |u: &String| self.assumed.get(u) == Some(&Assumption::Binding);
        let gone: Vec<String> = self.pods.keys().filter(|u| !uids.contains(*u) && !binding(u)).cloned().collect();
        for uid in gone {
            self.delete_pod(&uid);
        }
    }

    /// A pod gone (deleted, or ended): what it held is free.
    pub fn delete_pod(&mut self, uid: &str) {
        self.assumed.remove(uid);
        self.remove_pod(uid);
    }

    fn remove_pod(&mut self, uid: &str) {
        if self.pods.remove(uid).is_none() {
            return;
        }
        self.generation += 1;
        if let Some(b) = &mut self.built
            && let Some(job) = b.pod_jobs.remove(uid)
        {
            b.job_pods.remove(&job);
            b.s.end_found(job);
        }
    }

    /// Something decisions read changed: the scheduler is built again when next asked.
    fn changed(&mut self) {
        self.built = None;
        self.generation += 1;
    }

    /// Builds the scheduler now if stale, so that the next request does not wait for it.
    pub fn warm(&mut self) {
        self.built();
    }

    /// Ties the clock to Unix time: clock zero was at `unix_ms`. From then on a bound pod
    /// has run since its `status.startTime` (`job.runtime`, what eviction rules read) and a
    /// pending pod has waited since its `metadata.creationTimestamp` (`job.waiting`).
    pub fn set_origin(&mut self, unix_ms: i64) {
        self.wall = Some(WallClock::at_unix_ms(unix_ms));
        self.changed();
    }

    /// Moves the clock to `ms` (it never goes back).
    pub fn set_clock(&mut self, ms: u64) {
        self.now_ms = self.now_ms.max(ms);
    }

    /// The scheduler, built now if stale, its clock brought up to date.
    fn built(&mut self) -> &mut Built {
        let Cluster { policy, nodes, pods, built, unplaced, now_ms, wall, .. } = self;
        let b = built.get_or_insert_with(|| {
            let (b, missed) = build(policy, nodes, pods, *now_ms, *wall);
            *unplaced = missed;
            b
        });
        let behind = now_ms.saturating_sub(b.s.now_ms());
        // Within the clock's limit: `set_clock` is given wall-clock time since start (a
        // step past it leaves the clock where it is).
        if behind > 0 {
            let _ = b.s.advance(behind);
        }
        b
    }

    /// The pod's answer on each named node (unknown names fail). kube-scheduler asks
    /// prioritize right after filter, about the same pod and some of the same nodes: the
    /// answers are kept and given again while nothing in the cluster has changed.
    pub fn evaluate(&mut self, pod: &Value, names: &[&str]) -> Result<Evaluation, FieldError> {
        let b = self.built();
        let ids: Vec<Option<NodeId>> = names.iter().map(|n| b.node_ids.get(*n).copied()).collect();
        let (generation, now) = (self.generation, self.now_ms);
        let reusable = self.last.as_ref().is_some_and(|l| {
            l.generation == generation
                && now.saturating_sub(l.at_ms) <= REUSE_MS
                && l.pod == *pod
                && ids.iter().flatten().all(|&i| l.answers.get(i).is_some_and(Option::is_some))
        });
        let last = match (reusable, &mut self.last) {
            (true, Some(last)) => last,
            _ => {
                let known: Vec<NodeId> = ids.iter().flatten().copied().collect();
                let last = self.work_out(pod, &known)?;
                self.last.insert(last)
            }
        };
        let unknown: Arc<str> = Arc::from("the extender does not know this node");
        let mut seen = vec![false; self.nodes.len()];
        let mut seen_unknown = rustc_hash::FxHashSet::default();
        let nodes = ids
            .iter()
            .zip(names)
            .map(|(id, name)| {
                let first = match id {
                    Some(i) => seen.get_mut(*i).is_none_or(|s| !std::mem::replace(s, true)),
                    None => seen_unknown.insert(*name),
                };
                first.then(|| match id.and_then(|i| last.answers.get(i)).and_then(Option::as_ref) {
                    Some(a) => a.clone(),
                    None => Answer::Fails { why: Arc::clone(&unknown), for_good: false },
                })
            })
            .collect();
        Ok(Evaluation { closed: last.closed.clone(), nodes, tiers: last.tiers })
    }

    /// Asks about the pod: its verdict on each node.
    fn work_out(&mut self, pod: &Value, known: &[NodeId]) -> Result<Last, FieldError> {
        let classes = |c: &str| self.policy.policy.priority_classes.iter().any(|(n, _)| n == c);
        let mapped = pods::pod(pod, &classes)?;
        let (generation, at_ms, wall) = (self.generation, self.now_ms, self.wall);
        let s = &mut self.built().s;
        let waited = since(wall, s.now_ms(), mapped.created_ms);
        let (closed, answers) = s
            .ask(mapped.job, waited, |asked| {
                let (s, id) = (asked.scheduler(), asked.job());
                let closed = asked.gate().err().map(|c| (Arc::from(explain::closed_text(s, id, c)), c.for_good));
                let mut texts = Texts::default();
                let mut answers = vec![None; s.cluster().nodes.len()];
                for (&n, v) in known.iter().zip(asked.node_verdicts(known)) {
                    if let Some(slot) = answers.get_mut(n) {
                        *slot = Some(texts.answer(s, v));
                    }
                }
                (closed, answers)
            })
            .map_err(|e| FieldError::new(e.field(), e.to_string()))?;
        let tiers = s.score_tier_count();
        Ok(Last { pod: pod.clone(), generation, at_ms, closed, tiers, answers })
    }
}

impl Cluster {
    /// What a decision about the pod sees now over the named nodes (unknown names are left
    /// out) — admit rules, quota, every node's verdict and scores — and where the policy
    /// would place it; with `search`, the victim search it would make. The pod's
    /// `namespace/name` with it. What the decision log records.
    pub fn account(&mut self, pod: &Value, names: &[&str], search: bool) -> Result<(String, Account), FieldError> {
        let classes = |c: &str| self.policy.policy.priority_classes.iter().any(|(n, _)| n == c);
        let mapped = pods::pod(pod, &classes)?;
        let wall = self.wall;
        let b = self.built();
        let among: Vec<NodeId> = names.iter().filter_map(|n| b.node_ids.get(*n).copied()).collect();
        let waited = since(wall, b.s.now_ms(), mapped.created_ms);
        let account =
            b.s.ask(mapped.job, waited, |asked| asked.account(&among, search))
                .map_err(|e| FieldError::new(e.field(), e.to_string()))?;
        Ok((format!("{}/{}", mapped.namespace, mapped.name), account))
    }

    /// Reserves the pod's place on `node` for `bind`: the policy's admit rules, quota,
    /// filters and fit are checked again now, and if the pod may start there it counts on
    /// the node at once, on the cards (and MIG instances) its `card_score` rules choose
    /// (else best fit). Returns the cards as annotation `gpol.dev/cards` records them; an
    /// error says why it may not start there, and nothing changes.
    pub fn reserve(&mut self, pod: &Value, node: &str) -> Result<String, FieldError> {
        let classes = |c: &str| self.policy.policy.priority_classes.iter().any(|(n, _)| n == c);
        let mut mapped = pods::pod(pod, &classes)?;
        let who = format!("pod `{}/{}`", mapped.namespace, mapped.name);
        if self.assumed.get(&mapped.uid) == Some(&Assumption::Binding) {
            return Err(FieldError::new("PodUID", format!("{who} is being bound already")));
        }
        if let Some(on) = self.pods.get(&mapped.uid).and_then(|p| p.node.as_deref()) {
            return Err(FieldError::new("PodUID", format!("{who} is bound already, to `{on}`")));
        }
        let wall = self.wall;
        let b = self.built();
        let Some(&n) = b.node_ids.get(node) else {
            return Err(FieldError::new("Node", format!("the extender does not know node `{node}`")));
        };
        let waited = since(wall, b.s.now_ms(), mapped.created_ms);
        let cards =
            b.s.ask(mapped.job.clone(), waited, |asked| {
                let (s, id) = (asked.scheduler(), asked.job());
                if let Err(closed) = asked.gate() {
                    return Err(explain::closed_text(s, id, closed));
                }
                let full = || explain::verdict_text(s, &NodeVerdict::Full).unwrap_or_default();
                match asked.node_verdicts(&[n]).pop() {
                    Some(NodeVerdict::Fits(_)) => asked.cards_for(n).ok_or_else(full),
                    Some(v) => Err(explain::verdict_text(s, &v).unwrap_or_else(full)),
                    None => Err(full()),
                }
            })
            .map_err(|e| FieldError::new(e.field(), e.to_string()))?;
        let cards =
            cards.map_err(|why| FieldError::new("Node", format!("{who} may not start on `{node}` now: {why}")))?;
        let text = pods::cards_text(&cards);
        mapped.node = Some(node.to_string());
        mapped.cards = Some(cards);
        mapped.phase = Phase::Bound;
        let uid = mapped.uid.clone();
        self.insert_bound(mapped)?;
        // Checked to fit a moment ago, so it starts; were it not counted, the place would
        // not be held and must not be promised.
        if self.built.as_ref().is_some_and(|b| !b.pod_jobs.contains_key(&uid)) {
            self.remove_pod(&uid);
            self.unplaced = self.unplaced.saturating_sub(1);
            return Err(FieldError::new("Node", format!("{who} could not be counted on `{node}`")));
        }
        self.assumed.insert(uid, Assumption::Binding);
        Ok(text)
    }

    /// The reserved pod's bind failed: its place is free again. A pod not reserved (or
    /// reported bound by the watch since) is left as it is.
    pub fn release(&mut self, uid: &str) {
        if self.assumed.remove(uid).is_some() {
            self.remove_pod(uid);
        }
    }

    /// The reserved pod's bind succeeded: it keeps its place until the watch reports it.
    pub fn bound(&mut self, uid: &str) {
        if let Some(a) = self.assumed.get_mut(uid) {
            *a = Assumption::Bound;
        }
    }

    /// Pods reserved by `bind` that the watch has not yet reported bound.
    pub fn assumed_count(&self) -> usize {
        self.assumed.len()
    }

    /// Which of kube-scheduler's proposed preemptions (victim UIDs per node) the policy
    /// stands behind: gpol's own victim search, when it frees one of the proposed nodes
    /// by evicting only pods on that node; otherwise each proposal whose every victim the
    /// policy's rules allow evicting for this pod. Nodes left out are not to be preempted on.
    pub fn victims(
        &mut self,
        pod: &Value,
        proposed: &BTreeMap<String, Vec<String>>,
    ) -> Result<BTreeMap<String, Vec<String>>, FieldError> {
        let classes = |c: &str| self.policy.policy.priority_classes.iter().any(|(n, _)| n == c);
        let mapped = pods::pod(pod, &classes)?;
        let wall = self.wall;
        let b = self.built();
        let waited = since(wall, b.s.now_ms(), mapped.created_ms);
        let Built { s, job_pods, .. } = b;
        let search = s
            .ask(mapped.job, waited, |asked| {
                let closed_for_good = asked.gate().err().is_some_and(|c| c.for_good);
                (!closed_for_good).then(|| asked.victim_search())
            })
            .map_err(|e| FieldError::new(e.field(), e.to_string()))?;
        let mut agreed = BTreeMap::new();
        if let Some(search) = search {
            let node_of = |job: JobId| s.jobs()[job].holding.slots.first().map(|slot| slot.node);
            let own = search.eviction.as_ref().and_then(|e| {
                let &[node] = e.replicas.as_slice() else { return None };
                let name = &s.cluster().nodes[node].name;
                let uids: Option<Vec<String>> = e
                    .victims
                    .iter()
                    .map(|v| (node_of(v.job) == Some(node)).then(|| job_pods.get(&v.job).cloned()).flatten())
                    .collect();
                Some((name.clone(), uids?)).filter(|(n, u)| proposed.contains_key(n) && !u.is_empty())
            });
            match own {
                Some((node, uids)) => {
                    agreed.insert(node, uids);
                }
                None => {
                    let allowed: std::collections::HashSet<&str> = search
                        .considered
                        .iter()
                        .filter(|(_, v)| matches!(v, gpol_runtime::preempt::Verdict::Candidate { .. }))
                        .filter_map(|(job, _)| job_pods.get(job).map(String::as_str))
                        .collect();
                    for (node, uids) in proposed {
                        if !uids.is_empty() && uids.iter().all(|u| allowed.contains(u.as_str())) {
                            agreed.insert(node.clone(), uids.clone());
                        }
                    }
                }
            }
        }
        Ok(agreed)
    }
}

/// How long before clock `now_ms` a pod's Unix timestamp was (0 when unknown or later).
fn since(wall: Option<WallClock>, now_ms: u64, at: Option<i64>) -> u64 {
    let (Some(wall), Some(at)) = (wall, at) else { return 0 };
    wall.elapsed_ms(now_ms, at)
}

/// Starts a bound pod on its node in the scheduler, as running since its start time;
/// false when it does not fit there.
fn start(b: &mut Built, pod: &MappedPod, wall: Option<WallClock>) -> bool {
    let Some(&node) = pod.node.as_ref().and_then(|n| b.node_ids.get(n)) else { return false };
    let waited = since(wall, b.s.now_ms(), pod.created_ms);
    let history = History { ran_ms: since(wall, b.s.now_ms(), pod.started_ms), ..History::default() };
    // On the cards `bind` recorded, if it did (a pod bound by another scheduler has none:
    // gpol's best fit stands in for the device plugin's choice).
    let on = match &pod.cards {
        Some(cards) => Found::Cards(node, cards),
        None => Found::Nodes(std::slice::from_ref(&node)),
    };
    let Ok(job) = b.s.start_found(pod.job.clone(), waited, on, history) else { return false };
    b.pod_jobs.insert(pod.uid.clone(), job);
    b.job_pods.insert(job, pod.uid.clone());
    true
}

/// A scheduler running `policy` on the nodes, with the bound pods started on theirs;
/// and how many pods did not fit.
fn build(
    policy: &CompiledPolicy,
    nodes: &BTreeMap<String, MappedNode>,
    pods: &HashMap<String, MappedPod>,
    now_ms: u64,
    wall: Option<WallClock>,
) -> (Built, usize) {
    let levels = &policy.program.levels;
    let mut s = Scheduler::new(policy.clone());
    if let Some(wall) = wall {
        s.start_wall_clock(wall);
    }
    // At the cluster's time before pods start, so that each runs since its own start. (A
    // clock beyond the runtime's limit stays behind, as `built` leaves it.)
    let _ = s.advance(now_ms);
    let mut node_ids = FxHashMap::default();
    for (name, n) in nodes {
        let spec = NodeSpec { domains: domains_at(&n.topology, levels), ..n.spec.clone() };
        // Every mapped node is within the limits `add_node` checks.
        if let Ok(id) = s.add_node(&spec) {
            if n.cordoned {
                s.drain_node(id);
            }
            node_ids.insert(name.clone(), id);
        }
    }
    let mut b = Built { s, node_ids, pod_jobs: HashMap::new(), job_pods: HashMap::new() };
    let mut bound: Vec<&MappedPod> = pods.values().collect();
    bound.sort_by(|x, y| (&x.node, &x.uid).cmp(&(&y.node, &y.uid)));
    let missed = bound.into_iter().filter(|p| !start(&mut b, p, wall)).count();
    (b, missed)
}

/// Each failing verdict's words, worked out once per evaluation (most nodes fail for
/// one of a few reasons).
#[derive(Default)]
struct Texts(Vec<(NodeVerdict, Arc<str>, bool)>);

impl Texts {
    fn answer(&mut self, s: &Scheduler, v: NodeVerdict) -> Answer {
        if let NodeVerdict::Fits(r) = v {
            return Answer::Fits(Rank(r));
        }
        if let Some((_, why, for_good)) = self.0.iter().find(|(known, _, _)| *known == v) {
            return Answer::Fails { why: Arc::clone(why), for_good: *for_good };
        }
        let for_good = v.for_good();
        let why: Arc<str> = Arc::from(explain::verdict_text(s, &v).unwrap_or_default());
        self.0.push((v, Arc::clone(&why), for_good));
        Answer::Fails { why, for_good }
    }
}
