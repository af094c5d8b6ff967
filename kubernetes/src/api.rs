//! The connection to the API server: nodes and pods watched into the extender's cluster
//! (so kube-scheduler may send node names only, `nodeCacheCapable: true`), and `bind` —
//! the card assignment recorded on the pod, then the pod bound to its node.

use crate::cluster::Cluster;
use crate::extender::ExtenderBindingArgs;
use crate::pods::keys;
use crate::served::Extender;
use futures::StreamExt;
use gpol_runtime::account::Outcome;
use gpol_runtime::decision_log::Verb;
use k8s_openapi::api::core::v1::{Binding, Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::Arc;

/// A client for the API server: in a pod, its service account; elsewhere, the kubeconfig
/// (`KUBECONFIG`, `~/.kube/config`).
pub async fn connect() -> Result<Client, kube::Error> {
    Client::try_default().await
}

/// Why a bind failed, as kube-scheduler is told.
#[derive(Debug)]
pub enum BindError {
    /// The place is refused (the policy, the cards): in the cluster's words, which name the pod.
    Refused(String),
    /// A step of binding the pod (`pod ns/name`) failed. (Boxed: a `kube::Error` is
    /// large, and errors travel through every `?`.)
    Failed { pod: String, step: Box<BindStep> },
}

/// The step of a bind that failed.
#[derive(Debug)]
pub enum BindStep {
    Read(kube::Error),
    /// The pod has another UID than the one asked for.
    Replaced {
        uid: String,
    },
    AlreadyBound {
        node: String,
    },
    NoUid,
    Encode(serde_json::Error),
    /// This replica may no longer write.
    NotLeading(crate::leader::NotLeading),
    RecordCards(kube::Error),
    Bind {
        node: String,
        error: kube::Error,
    },
}

impl std::fmt::Display for BindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (pod, step) = match self {
            BindError::Refused(message) => return f.write_str(message),
            BindError::Failed { pod, step } => (pod, &**step),
        };
        match step {
            BindStep::Read(e) => write!(f, "{pod}: cannot read it: {e}"),
            BindStep::Replaced { uid } => write!(f, "{pod}: it was replaced (UID {uid} asked for)"),
            BindStep::AlreadyBound { node } => write!(f, "{pod}: it is already bound, to {node}"),
            BindStep::NoUid => write!(f, "{pod}: the API server gave it no UID"),
            BindStep::Encode(e) => write!(f, "{pod}: {e}"),
            BindStep::NotLeading(why) => write!(f, "{pod}: not bound: {why}"),
            BindStep::RecordCards(e) => write!(f, "{pod}: cannot record its cards: {e}"),
            BindStep::Bind { node, error } => write!(f, "{pod}: cannot bind it to {node}: {error}"),
        }
    }
}

impl std::error::Error for BindError {}

/// Where a watch stands: objects named during a re-list, and whether one has finished.
#[derive(Default)]
pub struct Sync {
    relisting: Option<HashSet<String>>,
    pub synced: bool,
}

/// Applies one node event; a node that cannot be mapped is logged and left out.
pub fn node_event(cluster: &mut Cluster, sync: &mut Sync, event: Event<Value>) {
    match event {
        Event::Init => sync.relisting = Some(HashSet::new()),
        Event::InitApply(node) | Event::Apply(node) => {
            if let (Some(seen), Ok(name)) = (sync.relisting.as_mut(), crate::nodes::name(&node)) {
                seen.insert(name.to_string());
            }
            if let Err(e) = cluster.apply_node(&node) {
                tracing::warn!(error = %e, "a node cannot be mapped: left out");
            }
        }
        Event::Delete(node) => {
            if let Ok(name) = crate::nodes::name(&node) {
                cluster.delete_node(name);
            }
        }
        Event::InitDone => {
            if let Some(seen) = sync.relisting.take() {
                cluster.retain_nodes(&seen.iter().map(String::as_str).collect());
            }
            sync.synced = true;
        }
    }
}

/// Applies one pod event; a pod that cannot be mapped is logged and left out.
pub fn pod_event(cluster: &mut Cluster, sync: &mut Sync, event: Event<Value>) {
    let uid = |pod: &Value| pod.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_string();
    match event {
        Event::Init => sync.relisting = Some(HashSet::new()),
        Event::InitApply(pod) | Event::Apply(pod) => {
            if let Some(seen) = sync.relisting.as_mut() {
                seen.insert(uid(&pod));
            }
            if let Err(e) = cluster.apply_pod(&pod) {
                tracing::warn!(error = %e, "a pod cannot be mapped: left out");
            }
        }
        Event::Delete(pod) => cluster.delete_pod(&uid(&pod)),
        Event::InitDone => {
            if let Some(seen) = sync.relisting.take() {
                cluster.retain_pods(&seen);
            }
            sync.synced = true;
        }
    }
}

/// Keeps the extender's cluster in step with the API server's nodes and pods; the
/// extender is ready once both have been listed. Runs until the process stops (the
/// watches reconnect with backoff after errors).
pub async fn watch(client: Client, ext: Arc<Extender>) {
    let nodes = watcher::watcher(Api::<Node>::all(client.clone()), watcher::Config::default()).default_backoff();
    let pods = watcher::watcher(Api::<Pod>::all(client), watcher::Config::default()).default_backoff();
    enum Change {
        Node(Event<Value>),
        Pod(Event<Value>),
    }
    let nodes = nodes.map(|e| e.map(|e| Change::Node(as_value(e))));
    let pods = pods.map(|e| e.map(|e| Change::Pod(as_value(e))));
    let mut changes = std::pin::pin!(futures::stream::select(nodes, pods));
    let (mut node_sync, mut pod_sync) = (Sync::default(), Sync::default());
    while let Some(change) = changes.next().await {
        match change {
            Ok(change) => {
                let mut cluster = ext.cluster();
                match change {
                    Change::Node(e) => node_event(&mut cluster, &mut node_sync, e),
                    Change::Pod(e) => pod_event(&mut cluster, &mut pod_sync, e),
                }
                ext.metrics.held(&cluster);
            }
            Err(e) => tracing::warn!(error = %e, "watching the API server: retrying"),
        }
        if node_sync.synced && pod_sync.synced && !ext.is_ready() {
            ext.cluster().warm();
            ext.set_ready(true);
            tracing::info!("nodes and pods listed: ready");
        }
    }
}

/// A watched object as the JSON the mappings read.
fn as_value<K: serde::Serialize>(e: Event<K>) -> Event<Value> {
    let v = |o: K| serde_json::to_value(o).unwrap_or(Value::Null);
    match e {
        Event::Apply(o) => Event::Apply(v(o)),
        Event::InitApply(o) => Event::InitApply(v(o)),
        Event::Delete(o) => Event::Delete(v(o)),
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
    }
}

/// Binds a pod: its place on the node is reserved first ([`Cluster::reserve`], which
/// checks the policy again under the cluster's lock, so binds sent at once cannot take
/// the same cards or quota), the cards are written on the pod (annotation
/// `gpol.dev/cards`, conditional on the pod being unchanged since it was read), then the
/// pod is bound. If either write fails the place is given back and the error says what
/// failed; kube-scheduler then forgets its own assumption and retries the pod. With
/// leader election each write is sent only while this replica still leads
/// ([`Extender::may_write`]); else the place is given back too.
pub async fn bind(client: &Client, ext: &Extender, args: &ExtenderBindingArgs) -> Result<(), BindError> {
    let started = std::time::Instant::now();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &args.pod_namespace);
    let who = format!("pod {}/{}", args.pod_namespace, args.pod_name);
    let failed = |step| BindError::Failed { pod: who.clone(), step: Box::new(step) };
    let pod = pods.get(&args.pod_name).await.map_err(|e| failed(BindStep::Read(e)))?;
    if !args.pod_uid.is_empty() && pod.metadata.uid.as_deref() != Some(args.pod_uid.as_str()) {
        return Err(failed(BindStep::Replaced { uid: args.pod_uid.clone() }));
    }
    if let Some(on) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
        return Err(failed(BindStep::AlreadyBound { node: on.to_string() }));
    }
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    if uid.is_empty() {
        return Err(failed(BindStep::NoUid));
    }
    let value = serde_json::to_value(&pod).map_err(|e| failed(BindStep::Encode(e)))?;
    let cards = {
        let mut cluster = ext.cluster();
        // What the bind saw, taken before the place is reserved (it then counts itself).
        let seen = if ext.logs_decisions() { cluster.account(&value, &[&args.node], false).ok() } else { None };
        let reserved = cluster.reserve(&value, &args.node);
        if let Some((job, mut account)) = seen {
            account.outcome = match &reserved {
                Ok(_) => Outcome::Placed { nodes: vec![args.node.clone()] },
                Err(e) => Outcome::Waits { reason: "bind refused".into(), detail: Some(e.message.clone()) },
            };
            let inputs = serde_json::to_vec(&value).unwrap_or_default();
            ext.log_decision(&cluster, Verb::Bind, &job, &inputs, account);
        }
        let cards = reserved.map_err(|e| BindError::Refused(e.message))?;
        ext.metrics.held(&cluster);
        cards
    };
    let may_write = || ext.may_write(started).map_err(|why| failed(BindStep::NotLeading(why)));
    let written = write(&pods, &pod, args, &cards, &who, may_write).await;
    let mut cluster = ext.cluster();
    match &written {
        Ok(()) => cluster.bound(&uid),
        Err(_) => cluster.release(&uid),
    }
    ext.metrics.held(&cluster);
    written
}

/// The bind's two writes: the cards on the pod, then the Binding. A Binding whose
/// answer was lost (a dropped connection, a timeout) may have happened: the pod is read
/// again, and bound to this node it counts as bound.
async fn write(
    pods: &Api<Pod>,
    pod: &Pod,
    args: &ExtenderBindingArgs,
    cards: &str,
    who: &str,
    may_write: impl Fn() -> Result<(), BindError>,
) -> Result<(), BindError> {
    let failed = |step| BindError::Failed { pod: who.to_string(), step: Box::new(step) };
    may_write()?;
    // The resourceVersion makes the write conditional: a pod changed meanwhile is a conflict.
    let patch =
        json!({"metadata": {"resourceVersion": pod.metadata.resource_version, "annotations": {keys::CARDS: cards}}});
    pods.patch(&args.pod_name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| failed(BindStep::RecordCards(e)))?;
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(args.pod_name.clone()),
            namespace: Some(args.pod_namespace.clone()),
            uid: pod.metadata.uid.clone(),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(args.node.clone()),
            ..ObjectReference::default()
        },
    };
    // The cards written on a pod left pending count for nothing: the next bind writes its own.
    may_write()?;
    let e = match pods
        .create_subresource::<Binding, Value>("binding", &args.pod_name, &PostParams::default(), &binding)
        .await
    {
        Ok(_) => return Ok(()),
        Err(e) => e,
    };
    if !matches!(e, kube::Error::Api(_)) {
        let now = pods.get(&args.pod_name).await.ok();
        let on = now.as_ref().and_then(|p| p.spec.as_ref()).and_then(|s| s.node_name.as_deref());
        if on == Some(args.node.as_str())
            && now.as_ref().and_then(|p| p.metadata.uid.as_ref()) == pod.metadata.uid.as_ref()
        {
            return Ok(());
        }
    }
    Err(failed(BindStep::Bind { node: args.node.clone(), error: e }))
}
