//! The API connection against an in-memory API server (`kube-fake-client`): `bind`
//! records the policy's card choice on the pod and binds it, counts it at once, and
//! refuses — without a half-done write — a pod changed since it was read or already
//! bound; watch events (lists, re-lists, deletions) keep the cluster in step.

use gpol_compiler::engine::EngineKind;
use gpol_kubernetes::api::{self, Sync};
use gpol_kubernetes::extender::ExtenderBindingArgs;
use gpol_kubernetes::served::Extender;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use kube::runtime::watcher::Event;
use kube_fake_client::{ClientBuilder, interceptor};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

const POLICY: &str = "policy bound\n\nscore most_free { node.free_gpu / 8 gpu }\n";

fn extender() -> (Extender, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("policy.gpol");
    std::fs::write(&path, POLICY).expect("written");
    (Extender::load(path, EngineKind::Jit).expect("loads"), dir)
}

fn node(name: &str, cards: u32) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "resourceVersion": "1"},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": cards.to_string()}}})
}

fn pod(name: &str, cards: u32) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": cards.to_string()}}}]}})
}

/// The fake API server binds as the real one does (it has no `binding` subresource): a
/// Binding sets the pod's node, and a pod already bound is a conflict.
fn binding_api() -> interceptor::Funcs {
    interceptor::Funcs::new().create(|ctx| {
        if ctx.object.get("kind").and_then(Value::as_str) != Some("Binding") {
            return Ok(None);
        }
        let name = ctx.object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        let target = ctx.object.pointer("/target/name").and_then(Value::as_str).unwrap_or_default();
        let mut pod: Pod = ctx.client.get(ctx.namespace, name)?;
        let spec = pod.spec.get_or_insert_with(Default::default);
        if spec.node_name.is_some() {
            return Err(kube_fake_client::Error::Conflict(format!("pod {name} is already assigned to a node")));
        }
        spec.node_name = Some(target.to_string());
        ctx.client.update(ctx.namespace, &pod, &PostParams::default())?;
        Ok(Some(json!({"kind": "Status", "apiVersion": "v1", "status": "Success"})))
    })
}

fn args(name: &str, node: &str) -> ExtenderBindingArgs {
    ExtenderBindingArgs {
        pod_name: name.into(),
        pod_namespace: "ml".into(),
        pod_uid: format!("uid-{name}"),
        node: node.into(),
    }
}

#[tokio::test]
async fn bind_records_the_cards_then_binds() {
    let (ext, _dir) = extender();
    ext.cluster().apply_node(&node("a", 4)).expect("node");
    let first: Pod = serde_json::from_value(pod("first", 2)).expect("pod");
    let second: Pod = serde_json::from_value(pod("second", 2)).expect("pod");
    let client = ClientBuilder::new()
        .with_object(first)
        .with_object(second)
        .with_interceptor_funcs(binding_api())
        .build()
        .await
        .expect("the fake API");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");

    api::bind(&client, &ext, &args("first", "a")).await.expect("bound");
    let bound = pods.get("first").await.expect("pod");
    assert_eq!(bound.spec.as_ref().and_then(|s| s.node_name.as_deref()), Some("a"));
    let cards = bound.metadata.annotations.as_ref().and_then(|a| a.get("gpol.dev/cards")).cloned();
    assert_eq!(cards.as_deref(), Some("0,1"));
    // Counted at once: the second pod gets the other two cards.
    assert_eq!(ext.cluster().pod_count(), 1);
    api::bind(&client, &ext, &args("second", "a")).await.expect("bound");
    let second = pods.get("second").await.expect("pod");
    assert_eq!(
        second.metadata.annotations.as_ref().and_then(|a| a.get("gpol.dev/cards")).map(String::as_str),
        Some("2,3")
    );

    // Bound already: refused before anything is written.
    let e = api::bind(&client, &ext, &args("first", "a")).await.expect_err("already bound").to_string();
    assert_eq!(e, "pod ml/first: it is already bound, to a");
    // No room left on the node: refused before anything is written.
    let third: Pod = serde_json::from_value(pod("third", 1)).expect("pod");
    pods.create(&PostParams::default(), &third).await.expect("created");
    let e = api::bind(&client, &ext, &args("third", "a")).await.expect_err("no room").to_string();
    assert_eq!(e, "pod `ml/third` may not start on `a` now: not enough free capacity");
    let third = pods.get("third").await.expect("pod");
    assert!(third.metadata.annotations.is_none_or(|a| !a.contains_key("gpol.dev/cards")));
    // A replaced pod (another UID) is not bound.
    let e = api::bind(&client, &ext, &ExtenderBindingArgs { pod_uid: "other".into(), ..args("second", "a") })
        .await
        .expect_err("replaced")
        .to_string();
    assert!(e.contains("was replaced"), "{e}");
    // A pod the API does not have.
    let e = api::bind(&client, &ext, &args("missing", "a")).await.expect_err("no such pod").to_string();
    assert!(e.contains("cannot read it"), "{e}");
}

#[tokio::test]
async fn a_pod_changed_since_it_was_read_is_a_conflict() {
    let (ext, _dir) = extender();
    ext.cluster().apply_node(&node("a", 4)).expect("node");
    let p: Pod = serde_json::from_value(pod("p", 1)).expect("pod");
    // Reads give a copy as it was before someone else's write: the conditional write of
    // the cards then conflicts, and the pod is neither annotated nor bound.
    let stale = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stale);
    let funcs = binding_api().get(move |ctx| {
        if !flag.load(Ordering::SeqCst) {
            return Ok(None);
        }
        let mut old: Value =
            serde_json::to_value(ctx.client.get::<Pod>(ctx.namespace, ctx.name)?).unwrap_or(Value::Null);
        old["metadata"]["resourceVersion"] = json!("0");
        Ok(Some(old))
    });
    let client = ClientBuilder::new().with_object(p).with_interceptor_funcs(funcs).build().await.expect("the fake API");
    stale.store(true, Ordering::SeqCst);
    let e = api::bind(&client, &ext, &args("p", "a")).await.expect_err("a conflict").to_string();
    assert!(e.contains("cannot record its cards"), "{e}");
    stale.store(false, Ordering::SeqCst);
    let pods: Api<Pod> = Api::namespaced(client, "ml");
    let p = pods.get("p").await.expect("pod");
    assert_eq!(p.spec.and_then(|s| s.node_name), None);
    assert!(p.metadata.annotations.is_none_or(|a| !a.contains_key("gpol.dev/cards")));
    assert_eq!(ext.cluster().pod_count(), 0);
}

#[test]
fn watch_events_keep_the_cluster_in_step() {
    let (ext, _dir) = extender();
    let mut c = ext.cluster();
    let (mut nodes, mut pods) = (Sync::default(), Sync::default());
    api::node_event(&mut c, &mut nodes, Event::Init);
    for n in ["a", "b", "c"] {
        api::node_event(&mut c, &mut nodes, Event::InitApply(node(n, 8)));
    }
    assert!(!nodes.synced);
    api::node_event(&mut c, &mut nodes, Event::InitDone);
    assert!(nodes.synced);
    assert_eq!(c.node_count(), 3);
    let mut bound = pod("run", 8);
    bound["spec"]["nodeName"] = json!("a");
    api::pod_event(&mut c, &mut pods, Event::Init);
    api::pod_event(&mut c, &mut pods, Event::InitApply(bound.clone()));
    api::pod_event(&mut c, &mut pods, Event::InitDone);
    assert_eq!(c.pod_count(), 1);
    // Node a is full: an 8-card pod fits only on b and c.
    let fits = |c: &mut gpol_kubernetes::cluster::Cluster| {
        let e = c.evaluate(&pod("new", 8), &["a", "b", "c"]).expect("evaluated");
        e.nodes.iter().map(|a| matches!(a, Some(gpol_kubernetes::cluster::Answer::Fits(_)))).collect::<Vec<_>>()
    };
    assert_eq!(fits(&mut c), vec![false, true, true]);
    // b deleted; a re-list without c drops it; the pod ends: a is free again.
    api::node_event(&mut c, &mut nodes, Event::Delete(node("b", 8)));
    api::node_event(&mut c, &mut nodes, Event::Init);
    api::node_event(&mut c, &mut nodes, Event::InitApply(node("a", 8)));
    api::node_event(&mut c, &mut nodes, Event::InitDone);
    assert_eq!(c.node_count(), 1);
    bound["status"] = json!({"phase": "Succeeded"});
    api::pod_event(&mut c, &mut pods, Event::Apply(bound));
    assert_eq!(c.pod_count(), 0);
    assert_eq!(fits(&mut c), vec![true, false, false]);
    // A re-list of pods that no longer names a bound pod frees it too.
    let mut other = pod("other", 4);
    other["spec"]["nodeName"] = json!("a");
    api::pod_event(&mut c, &mut pods, Event::Apply(other));
    assert_eq!(c.pod_count(), 1);
    api::pod_event(&mut c, &mut pods, Event::Init);
    api::pod_event(&mut c, &mut pods, Event::InitDone);
    assert_eq!(c.pod_count(), 0);
}

#[tokio::test]
async fn a_bind_is_logged_as_placed_or_refused_with_why() {
    use gpol_runtime::account::Outcome;
    use gpol_runtime::decision_log::{self, Verb, Writer};
    let dir = tempfile::tempdir().expect("temp dir");
    let (path, log) = (dir.path().join("policy.gpol"), dir.path().join("decisions.jsonl"));
    std::fs::write(&path, POLICY).expect("written");
    let writer = Writer::open(&log, &[&path]).expect("the log opens");
    let ext = Extender::load(path, EngineKind::Jit).expect("loads").with_decision_log(writer);
    ext.cluster().apply_node(&node("a", 4)).expect("node");
    let client = ClientBuilder::new()
        .with_object(serde_json::from_value::<Pod>(pod("first", 3)).expect("pod"))
        .with_object(serde_json::from_value::<Pod>(pod("second", 2)).expect("pod"))
        .with_interceptor_funcs(binding_api())
        .build()
        .await
        .expect("the fake API");
    api::bind(&client, &ext, &args("first", "a")).await.expect("bound");
    api::bind(&client, &ext, &args("second", "a")).await.expect_err("no room");

    let mut records = Vec::new();
    decision_log::read(&log, |_, r| records.push(r)).expect("the log reads back");
    let seen: Vec<(Verb, &str, &Outcome)> =
        records.iter().map(|r| (r.verb, r.job.as_str(), &r.account.outcome)).collect();
    let refused = Outcome::Waits {
        reason: "bind refused".into(),
        detail: Some("pod `ml/second` may not start on `a` now: not enough free capacity".into()),
    };
    assert_eq!(
        seen,
        [(Verb::Bind, "ml/first", &Outcome::Placed { nodes: vec!["a".into()] }), (Verb::Bind, "ml/second", &refused)]
    );
    // What the refused bind saw: the first pod's three cards taken.
    assert_eq!(records[1].account.nodes.len(), 1);
    assert_eq!(records[0].policy, decision_log::digest(POLICY.as_bytes()));
}
