//! Load on loopback, shared by the load benchmark and its short version in the tests: a
//! served extender with a generated cluster, and clients sending kube-scheduler's
//! requests one after another (as one scheduler does) or several at once. Bounded: a
//! fixed number of requests, then it stops.

#![allow(dead_code)]

use axum::body::Bytes;
use gpol_compiler::engine::EngineKind;
use gpol_kubernetes::served::Extender;
use gpol_kubernetes::server::{self, Options};
use gpol_kubernetes::tls::TlsFiles;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The policy served: pack_spread.gpol (tiers, weighted scores, a queue tree).
pub const POLICY: &str = "pack_spread.gpol";

#[derive(Clone, Copy, Debug)]
pub struct Setup {
    pub nodes: usize,
    /// Whole Node objects in each request (`nodeCacheCapable: false`), else names.
    pub whole_nodes: bool,
    /// Requests per client, each a filter then a prioritize.
    pub requests: usize,
    pub clients: usize,
    /// Over HTTPS (the server's certificate signed by a CA the clients trust).
    pub tls: bool,
}

#[derive(Clone, Debug)]
pub struct Report {
    pub setup: Setup,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
    /// Requests answered per second, all clients together.
    pub throughput: f64,
    /// Answers that were not 200 with every node accounted for.
    pub wrong: usize,
    /// The mean time the server spent per request (its own latency metric).
    pub server_mean: Duration,
}

/// The server's total request seconds and count so far, from its metrics.
fn server_seconds(ext: &Extender) -> (f64, f64) {
    let text = ext.metrics.render();
    let total = |suffix: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(&format!("gpol_extender_request_duration_seconds_{suffix}")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    (total("sum"), total("count"))
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.setup;
        let mode = if s.whole_nodes { "Nodes" } else { "NodeNames" };
        write!(
            f,
            "{:>5} nodes  {:<9}  {:<5}  {} client(s)  p50 {:>8.3} ms  p99 {:>8.3} ms  max {:>8.3} ms  {:>7.0} req/s  (server {:.3} ms){}",
            s.nodes,
            mode,
            if s.tls { "HTTPS" } else { "HTTP" },
            s.clients,
            self.p50.as_secs_f64() * 1e3,
            self.p99.as_secs_f64() * 1e3,
            self.max.as_secs_f64() * 1e3,
            self.throughput,
            self.server_mean.as_secs_f64() * 1e3,
            if self.wrong > 0 { format!("  {} WRONG", self.wrong) } else { String::new() }
        )
    }
}

fn node(i: usize) -> Value {
    let product = if i.is_multiple_of(4) { "h100" } else { "a100" };
    json!({"kind": "Node", "metadata": {"name": format!("node-{i:05}"), "resourceVersion": "1",
            "labels": {"nvidia.com/gpu.product": product, "topology.kubernetes.io/zone": format!("z{}", i % 3),
                "kubernetes.io/hostname": format!("node-{i:05}")}},
        "spec": {},
        "status": {"allocatable": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"},
            "capacity": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]}})
}

fn pod(name: &str, queue: &str, cards: u32, on: Option<String>) -> Value {
    json!({"metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"), "labels": {"gpol.dev/queue": queue}},
        "spec": {"nodeName": on, "containers": [{"name": "main", "image": "trainer:1",
            "resources": {"requests": {"cpu": "4", "memory": "32Gi"}, "limits": {"nvidia.com/gpu": cards.to_string()}}}]},
        "status": {"phase": if on.is_some() { "Running" } else { "Pending" }}})
}

/// An extender serving the policy on a cluster of `nodes` nodes, about half their cards
/// taken by running pods.
pub fn extender(nodes: usize) -> Arc<Extender> {
    let path = format!("{}/../policies/{POLICY}", env!("CARGO_MANIFEST_DIR"));
    let ext = Extender::load(path.into(), EngineKind::Jit).expect("the policy loads");
    {
        let mut c = ext.cluster();
        for i in 0..nodes {
            c.apply_node(&node(i)).expect("node");
            let cards = (i % 8) as u32;
            if cards > 0 {
                c.apply_pod(&pod(&format!("run-{i}"), "training", cards, Some(format!("node-{i:05}")))).expect("pod");
            }
        }
        c.warm();
    }
    ext.set_ready(true);
    Arc::new(ext)
}

/// A CA's certificate and a server certificate for `localhost` it signed, written to
/// `dir` as the server's TLS files.
fn certificates(dir: &std::path::Path) -> (TlsFiles, CertificateDer<'static>) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("a key")).expect("a CA");
    let key = KeyPair::generate().expect("a key");
    let cert =
        CertificateParams::new(vec!["localhost".to_string()]).expect("params").signed_by(&key, &ca).expect("signed");
    let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert_path, cert.pem()).expect("written");
    std::fs::write(&key_path, key.serialize_pem()).expect("written");
    (TlsFiles { cert: cert_path, key: key_path, client_ca: None }, ca.der().clone())
}

/// Runs the load and reports; the server is stopped at the end. The server runs on its
/// own runtime (two worker threads, as `gpolc serve` has on these machines), the clients
/// on another, as kube-scheduler is another process.
pub fn run(ext: Arc<Extender>, setup: Setup) -> Report {
    let server_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("the server's runtime");
    let listener = server_runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).expect("a loopback port");
    let addr = listener.local_addr().expect("address");
    let dir = tempfile::tempdir().expect("a directory for the certificates");
    let (files, root) = certificates(dir.path());
    let options = Options { tls: setup.tls.then_some(files), ..Options::default() };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = server_runtime.spawn(server::serve(Arc::clone(&ext), listener, options, async {
        let _ = stopped.await;
    }));
    let client_runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("the clients' runtime");
    let before = server_seconds(&ext);
    let tls = setup.tls.then(|| connector(root));
    let mut report = client_runtime.block_on(clients(addr, setup, tls));
    let after = server_seconds(&ext);
    report.server_mean = Duration::from_secs_f64((after.0 - before.0) / (after.1 - before.1).max(1.0));
    let _ = stop.send(());
    let _ = server_runtime.block_on(server);
    report
}

/// A TLS client trusting `root`.
fn connector(root: CertificateDer<'static>) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root).expect("a root");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// One client's connection, kept alive for all its requests (as kube-scheduler's is).
async fn connect(
    addr: std::net::SocketAddr,
    tls: Option<tokio_rustls::TlsConnector>,
) -> hyper::client::conn::http1::SendRequest<Full<Bytes>> {
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connects");
    tcp.set_nodelay(true).expect("nodelay");
    match tls {
        None => {
            let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.expect("HTTP");
            tokio::spawn(conn);
            sender
        }
        Some(tls) => {
            let name = ServerName::try_from("localhost").expect("a name");
            let stream = tls.connect(name, tcp).await.expect("a TLS handshake");
            let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("HTTP");
            tokio::spawn(conn);
            sender
        }
    }
}

async fn clients(addr: std::net::SocketAddr, setup: Setup, tls: Option<tokio_rustls::TlsConnector>) -> Report {
    let names: Vec<String> = (0..setup.nodes).map(|i| format!("node-{i:05}")).collect();
    let nodes = if setup.whole_nodes {
        json!({"Nodes": {"kind": "NodeList", "items": (0..setup.nodes).map(node).collect::<Vec<_>>()}})
    } else {
        json!({"NodeNames": names})
    };
    // Each request pair (filter, then prioritize) is about a new pod, as in a scheduler:
    // the pod goes last, so the bodies differ only in their tails.
    let head = serde_json::to_string(&nodes).expect("JSON");
    let head = head.strip_suffix('}').unwrap_or(&head).to_string();
    let body = move |k: usize| -> Bytes {
        let pod = serde_json::to_string(&pod(&format!("new-{k}"), "inference", 2, None)).expect("JSON");
        Bytes::from(format!("{head},\"Pod\":{pod}}}"))
    };
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..setup.clients {
        let body = body.clone();
        let expected = setup.nodes;
        let tls = tls.clone();
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(addr, tls).await;
            let mut latencies = Vec::with_capacity(2 * setup.requests);
            let mut wrong = 0;
            for k in 0..setup.requests {
                let body = body(c * setup.requests + k);
                for verb in ["filter", "prioritize"] {
                    let request = hyper::Request::post(format!("/gpol/{verb}"))
                        .header("host", "localhost")
                        .header("content-type", "application/json")
                        .body(Full::new(body.clone()))
                        .expect("request");
                    let t = Instant::now();
                    sender.ready().await.expect("the connection is open");
                    let response = sender.send_request(request).await.expect("an answer");
                    let status = response.status();
                    let bytes = response.into_body().collect().await.expect("body").to_bytes();
                    latencies.push(t.elapsed());
                    if status != 200 || !accounts_for_all(verb, &bytes, expected) {
                        wrong += 1;
                    }
                }
            }
            (latencies, wrong)
        }));
    }
    let mut latencies = Vec::new();
    let mut wrong = 0;
    for t in tasks {
        let (l, w) = t.await.expect("client");
        latencies.extend(l);
        wrong += w;
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    Report {
        setup,
        p50: at(0.5),
        p99: at(0.99),
        max: at(1.0),
        throughput: latencies.len() as f64 / elapsed.as_secs_f64(),
        wrong,
        server_mean: Duration::ZERO,
    }
}

/// Whether an answer accounts for every node once.
fn accounts_for_all(verb: &str, bytes: &[u8], nodes: usize) -> bool {
    let Ok(v) = serde_json::from_slice::<Value>(bytes) else { return false };
    if verb == "prioritize" {
        return v.as_array().is_some_and(|a| a.len() == nodes);
    }
    let len = |k: &str| v[k].as_object().map_or(0, |m| m.len());
    let passed = v["NodeNames"].as_array().map(Vec::len).or_else(|| v["Nodes"]["items"].as_array().map(Vec::len));
    passed.unwrap_or(0) + len("FailedNodes") + len("FailedAndUnresolvableNodes") == nodes
}
