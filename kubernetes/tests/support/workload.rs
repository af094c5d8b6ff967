//! What the binding-cycle and leader tests share: the policy and its queue limits, the
//! pods they submit, a `kube::Client` for the loopback API server, and waiting.

#![allow(dead_code)]

use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Two queues, each capped at 24 of the cluster's 64 cards: pods wait on quota as well
/// as on cards.
pub const POLICY: &str = "policy binds

queue root {
  queue a { limit 24 gpu }
  queue b { limit 24 gpu }
}

score most_free { node.free_gpu / max(node.cards, 1 gpu) }
";
pub const LIMITS: [(&str, u64); 2] = [("a", 24), ("b", 24)];
pub const NS: &str = "ml";

/// A pod of queue `queue` asking for `gpus` GPUs.
pub fn pod(name: &str, queue: &str, gpus: u64) -> Value {
    json!({"metadata": {"name": name, "namespace": NS, "labels": {"gpol.dev/queue": queue}},
        "spec": {"schedulerName": "default-scheduler", "containers": [{"name": "main", "image": "trainer:1",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                "limits": {"nvidia.com/gpu": gpus.to_string()}}}]}})
}

/// A `kube::Client` for `url` over plain HTTP, the way kube's docs build a custom client
/// from a `kube::Config` (its base URI layer over a hyper client), naming itself `agent`
/// (the User-Agent the API server logs) when given. Not `Client::try_from(config)`: that
/// builds a rustls connector even for `http://`, and in these test binaries rustls has
/// two crypto providers to choose from (kube's ring, and aws-lc-rs through the
/// dev-dependency kube-fake-client → jsonschema → reqwest), so it panics. (`gpolc serve`
/// itself has ring alone.)
pub fn kube_client(url: &str, agent: Option<&'static str>) -> kube::Client {
    use axum::http::{HeaderValue, header};
    use kube::client::ConfigExt;
    let config = kube::Config::new(url.parse().expect("the API server's URL"));
    let http = Client::builder(TokioExecutor::new()).build_http::<kube::client::Body>();
    let service = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .map_request(move |mut r: axum::http::Request<kube::client::Body>| {
            if let Some(agent) = agent {
                r.headers_mut().insert(header::USER_AGENT, HeaderValue::from_static(agent));
            }
            r
        })
        .service(http);
    kube::Client::new(service, config.default_namespace)
}

/// Waits until `done`, or fails the test after `limit`; how long it took.
pub async fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "waited {limit:?} for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    start.elapsed()
}
