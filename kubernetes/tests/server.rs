//! The extender over HTTP, through its router in memory: verbs under any prefix, any key
//! case; 4xx with a message for malformed JSON, unknown verbs, wrong methods and bodies
//! over the limit; health, readiness and metrics; and hot reload — a changed policy
//! swapped in, a broken one refused while the old one keeps serving.

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use gpol_compiler::engine::EngineKind;
use gpol_kubernetes::served::{Extender, Reload};
use gpol_kubernetes::server::{Options, router};
use http_body_util::BodyExt;
use std::sync::Arc;
use tower::ServiceExt;

const POLICY: &str = "policy served\n\nscore emptiest { node.free_gpu / max(node.cards, 1 gpu) }\n";
const PACKING: &str = "policy served\n\nscore fullest { 1 - node.free_gpu / max(node.cards, 1 gpu) }\n";

const NODES: &str = r#"{"items": [
  {"metadata": {"name": "a"}, "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": "8"}}},
  {"metadata": {"name": "b"}, "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": "8"}}}]}"#;

fn served(text: &str) -> (Arc<Extender>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("policy.gpol");
    std::fs::write(&path, text).expect("policy written");
    let ext = Arc::new(Extender::load(path, EngineKind::Jit).expect("the policy loads"));
    (ext, dir)
}

async fn call(ext: &Arc<Extender>, method: &str, path: &str, body: &str) -> (StatusCode, String) {
    let options = Options { max_body_bytes: 64 << 10, ..Options::default() };
    let request = Request::builder().method(method).uri(path).body(Body::from(body.to_string())).expect("request");
    let response = router(Arc::clone(ext), &options).oneshot(request).await.expect("an answer");
    let status = response.status();
    let bytes = response.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

/// A pod asking for `cards` GPUs, and node `b` half full as the extender knows it.
fn pod(cards: u32) -> String {
    format!(
        r#"{{"metadata": {{"name": "p", "uid": "u"}}, "spec": {{"containers": [{{"resources": {{"limits": {{"nvidia.com/gpu": "{cards}"}}}}}}]}}}}"#
    )
}

fn half_full_b(ext: &Extender) {
    let mut c = ext.cluster();
    c.apply_node(&serde_json::json!({"metadata": {"name": "a"}, "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": "8"}}}))
        .expect("node");
    c.apply_node(&serde_json::json!({"metadata": {"name": "b"}, "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": "8"}}}))
        .expect("node");
    c.apply_pod(&serde_json::json!({"metadata": {"name": "run", "uid": "r"}, "spec": {"nodeName": "b",
        "containers": [{"resources": {"limits": {"nvidia.com/gpu": "4"}}}]}, "status": {"phase": "Running"}}))
        .expect("pod");
}

#[tokio::test]
async fn verbs_answer_under_any_prefix_in_any_key_case() {
    let (ext, _dir) = served(POLICY);
    half_full_b(&ext);
    let body = format!(r#"{{"Pod": {}, "Nodes": {NODES}}}"#, pod(2));
    let (status, text) = call(&ext, "POST", "/scheduler/gpol/filter", &body).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let passed: Vec<&str> = v["Nodes"]["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|n| n["metadata"]["name"].as_str().expect("name"))
        .collect();
    assert_eq!(passed, vec!["a", "b"]);
    // Lower-case keys, names only: the emptiest node wins.
    let body = format!(r#"{{"pod": {}, "nodenames": ["a", "b"]}}"#, pod(2));
    let (status, text) = call(&ext, "POST", "/prioritize", &body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(text, r#"[{"Host":"a","Score":10},{"Host":"b","Score":9}]"#);
}

#[tokio::test]
async fn bad_requests_get_4xx_with_a_message() {
    let (ext, _dir) = served(POLICY);
    let cases = [
        ("POST", "/filter", "{not json".to_string(), StatusCode::BAD_REQUEST, "filter: not JSON"),
        ("POST", "/filter", r#"{"NodeNames": ["a"]}"#.to_string(), StatusCode::BAD_REQUEST, "the request has no `Pod`"),
        (
            "POST",
            "/filter",
            r#"{"Pod": 1, "NodeNames": "a"}"#.to_string(),
            StatusCode::BAD_REQUEST,
            "not an extender message",
        ),
        ("POST", "/gpol/frobnicate", "{}".to_string(), StatusCode::NOT_FOUND, "unknown verb at `/gpol/frobnicate`"),
        ("GET", "/filter", String::new(), StatusCode::METHOD_NOT_ALLOWED, "`/filter` answers POST only, not GET"),
        ("HEAD", "/healthz", String::new(), StatusCode::METHOD_NOT_ALLOWED, ""),
        ("POST", "/metrics", String::new(), StatusCode::METHOD_NOT_ALLOWED, "`/metrics` answers GET only, not POST"),
        (
            "POST",
            "/bind",
            r#"{"PodNamespace": "ml", "Node": "a"}"#.to_string(),
            StatusCode::BAD_REQUEST,
            "bind: the request has no `PodName`",
        ),
        (
            "POST",
            "/bind",
            r#"{"PodName": "p", "PodNamespace": "ml"}"#.to_string(),
            StatusCode::BAD_REQUEST,
            "the request has no `Node`",
        ),
        (
            "POST",
            "/filter",
            "x".repeat(65 << 10),
            StatusCode::PAYLOAD_TOO_LARGE,
            "larger than the limit of 65536 bytes",
        ),
    ];
    for (method, path, body, status, message) in cases {
        let (got, text) = call(&ext, method, path, &body).await;
        assert_eq!(got, status, "{method} {path}: {text}");
        assert!(text.contains(message), "{method} {path}: {text}");
    }
    // The server still answers.
    let (status, _) = call(&ext, "GET", "/healthz", "").await;
    assert_eq!(status, StatusCode::OK);
}

/// A request through the router with headers of its own.
async fn call_with(ext: &Arc<Extender>, options: &Options, request: Request<Body>) -> (StatusCode, HeaderMap, String) {
    let response = router(Arc::clone(ext), options).oneshot(request).await.expect("an answer");
    let (status, headers) = (response.status(), response.headers().clone());
    let bytes = response.into_body().collect().await.expect("body").to_bytes();
    (status, headers, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test]
async fn wrong_content_types_oversized_declarations_and_slow_bodies_are_refused_with_a_message() {
    let (ext, _dir) = served(POLICY);
    let options =
        Options { max_body_bytes: 1 << 10, timeout: std::time::Duration::from_millis(300), ..Options::default() };
    let post = |kind: Option<&str>| {
        let mut r = Request::builder().method("POST").uri("/filter");
        if let Some(k) = kind {
            r = r.header("content-type", k);
        }
        r
    };
    let (status, _, text) =
        call_with(&ext, &options, post(Some("text/plain")).body(Body::from("{}")).expect("request")).await;
    assert_eq!(
        (status, text.as_str()),
        (StatusCode::UNSUPPORTED_MEDIA_TYPE, "filter: the content type is `text/plain`, not application/json\n")
    );
    // JSON with a charset is JSON.
    let (status, _, text) = call_with(
        &ext,
        &options,
        post(Some("application/json; charset=utf-8")).body(Body::from("{}")).expect("request"),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    // A declared length over the limit is refused before a byte of the body is read: the
    // body here never ends, and the answer comes at once.
    let endless = Body::from_stream(futures::stream::pending::<Result<Vec<u8>, std::io::Error>>());
    let request = post(None).header("content-length", "1000000000").body(endless).expect("request");
    let (status, _, text) = call_with(&ext, &options, request).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{text}");
    assert!(text.contains("larger than the limit of 1024 bytes"), "{text}");
    // A body that never comes: 408 with a message when the time limit passes.
    let endless = Body::from_stream(futures::stream::pending::<Result<Vec<u8>, std::io::Error>>());
    let (status, _, text) = call_with(&ext, &options, post(None).body(endless).expect("request")).await;
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
    assert_eq!(text, "filter: not answered within the time limit of 300ms (--timeout)\n");
    // HEAD on health says which method it takes.
    let (status, headers, _) = call_with(
        &ext,
        &options,
        Request::builder().method("HEAD").uri("/healthz").body(Body::empty()).expect("request"),
    )
    .await;
    assert_eq!(
        (status, headers.get("allow").map(|v| v.as_bytes())),
        (StatusCode::METHOD_NOT_ALLOWED, Some(&b"GET"[..]))
    );
}

#[tokio::test]
async fn health_readiness_and_metrics() {
    let (ext, _dir) = served(POLICY);
    assert_eq!(call(&ext, "GET", "/healthz", "").await, (StatusCode::OK, "ok\n".into()));
    assert_eq!(call(&ext, "GET", "/readyz", "").await.0, StatusCode::SERVICE_UNAVAILABLE);
    ext.set_ready(true);
    assert_eq!(call(&ext, "GET", "/readyz", "").await.0, StatusCode::OK);
    let body = format!(r#"{{"Pod": {}, "NodeNames": ["a", "ghost"]}}"#, pod(1));
    call(&ext, "POST", "/filter", &body).await;
    call(&ext, "POST", "/filter", "nope").await;
    let (status, metrics) = call(&ext, "GET", "/metrics", "").await;
    assert_eq!(status, StatusCode::OK);
    for line in [
        r#"gpol_extender_requests_total{verb="filter",code="200"} 1"#,
        r#"gpol_extender_requests_total{verb="filter",code="400"} 1"#,
        // No node is known: no node could ever take the pod.
        r#"gpol_extender_decisions_total{outcome="unresolvable"} 2"#,
        r#"gpol_extender_request_duration_seconds_count{verb="filter"} 2"#,
    ] {
        assert!(metrics.lines().any(|l| l == line), "no `{line}` in\n{metrics}");
    }
}

#[tokio::test]
async fn a_changed_policy_is_swapped_in_and_a_broken_one_refused() {
    let (ext, dir) = served(POLICY);
    half_full_b(&ext);
    let body = format!(r#"{{"Pod": {}, "NodeNames": ["a", "b"]}}"#, pod(2));
    let best = |text: String| {
        let v: Vec<serde_json::Value> = serde_json::from_str(&text).expect("JSON");
        v.iter().find(|h| h["Score"] == 10).map(|h| h["Host"].as_str().expect("host").to_string())
    };
    assert!(matches!(ext.reload(), Reload::Unchanged));
    assert_eq!(best(call(&ext, "POST", "/prioritize", &body).await.1).as_deref(), Some("a"));
    std::fs::write(dir.path().join("policy.gpol"), PACKING).expect("written");
    assert!(matches!(ext.reload(), Reload::Swapped));
    assert_eq!(best(call(&ext, "POST", "/prioritize", &body).await.1).as_deref(), Some("b"));
    // A broken policy: refused with its diagnostics; the packing policy keeps serving.
    std::fs::write(dir.path().join("policy.gpol"), "policy broken\n\nscore x { node.nope }\n").expect("written");
    match ext.reload() {
        Reload::Refused(diagnostics) => assert!(diagnostics.contains("nope"), "{diagnostics}"),
        other => panic!("a broken policy was {other:?}"),
    }
    assert!(matches!(ext.reload(), Reload::Unchanged), "refused contents are not tried again");
    assert_eq!(best(call(&ext, "POST", "/prioritize", &body).await.1).as_deref(), Some("b"));
    let (_, metrics) = call(&ext, "GET", "/metrics", "").await;
    assert!(metrics.contains(r#"gpol_extender_policy_reloads_total{outcome="ok"} 1"#), "{metrics}");
    assert!(metrics.contains(r#"gpol_extender_policy_reloads_total{outcome="refused"} 1"#), "{metrics}");
}

#[tokio::test]
async fn a_heavy_request_is_answered_408_at_the_time_limit() {
    let (ext, _dir) = served(POLICY);
    let nodes: Vec<String> = (0..20_000)
        .map(|i| format!(r#"{{"metadata": {{"name": "n{i}"}}, "status": {{"allocatable": {{"cpu": "64", "nvidia.com/gpu": "8"}}}}}}"#))
        .collect();
    let body = format!(r#"{{"Pod": {}, "Nodes": {{"items": [{}]}}}}"#, pod(1), nodes.join(","));
    let options =
        Options { max_body_bytes: 64 << 20, timeout: std::time::Duration::from_millis(100), ..Options::default() };
    let request = Request::builder().method("POST").uri("/filter").body(Body::from(body)).expect("request");
    // Worked out on the connection's thread, the request would be answered 200 once done:
    // a 408 is the time limit answering while the work goes on behind it.
    let (status, _, text) = call_with(&ext, &options, request).await;
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT, "{text}");
}

#[tokio::test]
async fn every_decision_is_logged_with_what_it_saw_by_the_policy_served() {
    use gpol_runtime::account::{NodeSaw, Outcome};
    use gpol_runtime::decision_log::{self, Verb, Writer};
    let dir = tempfile::tempdir().expect("temp dir");
    let (policy, log) = (dir.path().join("policy.gpol"), dir.path().join("decisions.jsonl"));
    std::fs::write(&policy, POLICY).expect("policy written");
    let writer = Writer::open(&log, &[&policy]).expect("the log opens");
    let ext = Arc::new(Extender::load(policy.clone(), EngineKind::Jit).expect("loads").with_decision_log(writer));
    half_full_b(&ext);
    let small = format!(r#"{{"Pod": {}, "NodeNames": ["a", "b"]}}"#, pod(2));
    let big = format!(r#"{{"Pod": {}, "Nodes": {NODES}}}"#, pod(6));
    let preempt = format!(r#"{{"Pod": {}, "NodeNameToMetaVictims": {{"b": {{"Pods": [{{"UID": "r"}}]}}}}}}"#, pod(6));
    for (path, body) in [("/filter", &small), ("/prioritize", &small), ("/filter", &big), ("/preempt", &preempt)] {
        assert_eq!(call(&ext, "POST", path, body).await.0, StatusCode::OK, "{path}");
    }
    std::fs::write(&policy, PACKING).expect("written");
    assert!(matches!(ext.reload(), Reload::Swapped));
    assert_eq!(call(&ext, "POST", "/filter", &small).await.0, StatusCode::OK);
    // A request that is not a decision is not logged.
    assert_eq!(call(&ext, "POST", "/filter", r#"{"NodeNames": ["a"]}"#).await.0, StatusCode::BAD_REQUEST);

    let mut records = Vec::new();
    decision_log::read(&log, |_, r| records.push(r)).expect("the log reads back");
    let verbs: Vec<Verb> = records.iter().map(|r| r.verb).collect();
    assert_eq!(verbs, [Verb::Filter, Verb::Prioritize, Verb::Filter, Verb::Preempt, Verb::Filter]);
    let (served, packing) = (decision_log::digest(POLICY.as_bytes()), decision_log::digest(PACKING.as_bytes()));
    let policies: Vec<&str> = records.iter().map(|r| r.policy.as_str()).collect();
    assert_eq!(policies, [&served, &served, &served, &served, &packing]);
    assert_eq!(records[2].inputs, decision_log::digest(big.as_bytes()));
    assert!(records.iter().all(|r| r.job == "default/p" && r.source == "gpolc serve"));
    // Six cards fit on the empty node only; the half-full one passes its rules but not fit.
    let big = &records[2].account;
    let fits: Vec<(&str, bool)> = (big.nodes.iter())
        .map(|n| match &n.verdict {
            NodeSaw::Passes { fits, .. } => (n.name.as_str(), *fits),
            other => panic!("{}: {other:?}", n.name),
        })
        .collect();
    assert_eq!(fits, [("a", true), ("b", false)]);
    assert_eq!(big.outcome, Outcome::WouldPlace { nodes: vec!["a".into()] });
    // The preempt request proposed node b only: the account's nodes are the ones asked about.
    let names: Vec<&str> = records[3].account.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["b"]);
}
