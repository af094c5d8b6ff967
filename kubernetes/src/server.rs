//! `gpolc serve`: the extender over HTTP. kube-scheduler POSTs each verb to
//! `urlPrefix/<verb>`; any prefix is accepted, the verb being the last path segment.
//! `/healthz`, `/readyz` and `/metrics` are for the kubelet and Prometheus.
//!
//! Every request is bounded: bodies above the size limit are refused (413) before they
//! are read whole, a request slower than the time limit is answered 408, malformed JSON
//! and requests missing what a verb needs are answered 400 and unknown paths 404, each
//! with a message. The policy file is watched: a changed file is checked and compiled
//! aside, then swapped in whole; one that does not check is refused, its diagnostics
//! logged, and the old policy keeps serving.

use crate::cluster::Cluster;
use crate::extender::{self, ExtenderArgs, ExtenderBindingArgs, ExtenderBindingResult, ExtenderPreemptionArgs};
use crate::metrics::Metrics;
use crate::verbs::{self, BadRequest};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use gpol_compiler::engine::EngineKind;
use gpol_compiler::load::Checked;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Limits and timings of a served extender.
#[derive(Clone, Debug)]
pub struct Options {
    /// The largest request body read (a request sending 5,000 whole Node objects is
    /// about 25 MB).
    pub max_body_bytes: usize,
    /// The longest a request may take (kube-scheduler's own `httpTimeout` is 5 s).
    pub timeout: Duration,
    /// How often the policy file is looked at for changes.
    pub reload_every: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options { max_body_bytes: 64 << 20, timeout: Duration::from_secs(5), reload_every: Duration::from_secs(2) }
    }
}

/// What a reload did.
#[derive(Debug)]
pub enum Reload {
    Unchanged,
    Swapped,
    /// The new file does not check or cannot be read: its diagnostics.
    Refused(String),
}

/// The served extender: the cluster it knows, the policy file, the metrics.
pub struct Extender {
    cluster: Mutex<Cluster>,
    pub metrics: Metrics,
    path: PathBuf,
    engine: EngineKind,
    /// The policy file's contents as last compiled (or refused).
    source: Mutex<Vec<u8>>,
    started: Instant,
    /// Whether the cluster's state is known (set by whoever feeds it).
    ready: std::sync::atomic::AtomicBool,
    /// The API server, once connected: `bind` goes through it.
    api: std::sync::OnceLock<kube::Client>,
}

impl Extender {
    /// Loads the policy; its diagnostics when it does not check.
    pub fn load(path: PathBuf, engine: EngineKind) -> Result<Extender, String> {
        let bytes =
            gpol_compiler::files::read(&path, gpol_compiler::limits::MAX_POLICY_BYTES).map_err(|e| e.to_string())?;
        let policy = Checked::from_bytes(&path.display().to_string(), bytes.clone())
            .compile(engine)
            .map_err(|f| f.to_string())?;
        let metrics = Metrics::default();
        let mut cluster = Cluster::new(policy);
        let unix_now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        cluster.set_origin(i64::try_from(unix_now.as_millis()).unwrap_or(i64::MAX));
        Ok(Extender {
            cluster: Mutex::new(cluster),
            metrics,
            path,
            engine,
            source: Mutex::new(bytes),
            started: Instant::now(),
            ready: std::sync::atomic::AtomicBool::new(false),
            api: std::sync::OnceLock::new(),
        })
    }

    /// The cluster, for whoever keeps it up to date. A panic while it was held cannot
    /// leave it half-changed in a way that matters more than a stale cache: carry on.
    pub fn cluster(&self) -> MutexGuard<'_, Cluster> {
        self.cluster.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Binds pods through this API server from now on (the first connection stays), and
    /// takes nodes from its watch only: request bodies no longer change what is known.
    pub fn connect(&self, client: kube::Client) {
        self.cluster().watch_nodes();
        let _ = self.api.set(client);
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Looks at the policy file: a changed one is checked and compiled aside and swapped
    /// in whole, or refused with its diagnostics while the old policy keeps serving.
    pub fn reload(&self) -> Reload {
        let bytes = match gpol_compiler::files::read(&self.path, gpol_compiler::limits::MAX_POLICY_BYTES) {
            Ok(b) => b,
            Err(e) => return self.refuse(e.to_string()),
        };
        {
            let mut last = self.source.lock().unwrap_or_else(PoisonError::into_inner);
            if *last == bytes {
                return Reload::Unchanged;
            }
            // Refused contents are not tried again until they change.
            *last = bytes.clone();
        }
        match Checked::from_bytes(&self.path.display().to_string(), bytes).compile(self.engine) {
            Ok(policy) => {
                self.cluster().set_policy(policy);
                self.metrics.reloaded(true);
                tracing::info!(policy = %self.path.display(), "policy reloaded");
                Reload::Swapped
            }
            Err(failed) => self.refuse(failed.to_string()),
        }
    }

    fn refuse(&self, diagnostics: String) -> Reload {
        self.metrics.reloaded(false);
        tracing::error!(policy = %self.path.display(), %diagnostics, "policy refused; the previous one keeps serving");
        Reload::Refused(diagnostics)
    }

    /// Answers one verb: decodes the request (any key case), runs it on the cluster and
    /// encodes the answer; counts and times it.
    fn answer<A: DeserializeOwned, R: Serialize>(
        &self,
        verb: &str,
        body: &[u8],
        run: impl FnOnce(&mut Cluster, A, &Metrics) -> Result<R, BadRequest>,
    ) -> Response {
        let start = Instant::now();
        let outcome = extender::decode::<A>(body).map_err(BadRequest).and_then(|args| {
            let mut cluster = self.cluster();
            cluster.set_clock(u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX));
            let answer = run(&mut cluster, args, &self.metrics);
            self.metrics.nodes.set(cluster.node_count() as i64);
            self.metrics.pods.set(cluster.pod_count() as i64);
            self.metrics.unplaced.set(cluster.unplaced() as i64);
            answer
        });
        let response = match outcome {
            Ok(answer) => ([(header::CONTENT_TYPE, "application/json")], extender::encode(&answer)).into_response(),
            Err(BadRequest(message)) => {
                tracing::warn!(verb, %message, "bad request");
                (StatusCode::BAD_REQUEST, format!("{verb}: {message}\n")).into_response()
            }
        };
        self.metrics.answered(verb, response.status().as_u16(), start.elapsed().as_secs_f64());
        response
    }
}

/// The verbs, by the last segment of the path.
const VERBS: [&str; 4] = ["filter", "prioritize", "preempt", "bind"];

/// The router: the verbs under any prefix, health, readiness and metrics, with the
/// request time limit.
pub fn router(extender: Arc<Extender>, options: &Options) -> Router {
    let limit = options.max_body_bytes;
    Router::new()
        .fallback(move |State(ext): State<Arc<Extender>>, request: Request| route(ext, request, limit))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, options.timeout))
        .with_state(extender)
}

async fn route(ext: Arc<Extender>, request: Request, limit: usize) -> Response {
    let path = request.uri().path().to_string();
    let method = request.method().clone();
    let plain = |code: StatusCode, text: String| {
        (code, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
    };
    match (method, path.as_str()) {
        (Method::GET, "/healthz") => plain(StatusCode::OK, "ok\n".into()),
        (Method::GET, "/readyz") if ext.is_ready() => plain(StatusCode::OK, "ready\n".into()),
        (Method::GET, "/readyz") => {
            plain(StatusCode::SERVICE_UNAVAILABLE, "the cluster's state is not known yet\n".into())
        }
        (Method::GET, "/metrics") => (
            [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
            ext.metrics.render(),
        )
            .into_response(),
        (method, _) => {
            let verb = path.rsplit('/').next().unwrap_or_default();
            if !VERBS.contains(&verb) {
                let known = VERBS.join(", ");
                return plain(
                    StatusCode::NOT_FOUND,
                    format!("unknown verb at `{path}`: the verbs are {known} (POST)\n"),
                );
            }
            if method != Method::POST {
                return plain(StatusCode::METHOD_NOT_ALLOWED, format!("{verb}: POST a JSON request\n"));
            }
            let body = match axum::body::to_bytes(request.into_body(), limit).await {
                Ok(b) => b,
                Err(_) => {
                    ext.metrics.answered(verb, 413, 0.0);
                    let m =
                        format!("{verb}: the request body is larger than the limit of {limit} bytes (--max-body)\n");
                    return plain(StatusCode::PAYLOAD_TOO_LARGE, m);
                }
            };
            match (verb, ext.api.get()) {
                ("bind", Some(client)) => bind(&ext, client, &body).await,
                _ => dispatch(&ext, verb, &body),
            }
        }
    }
}

/// bind, through the API server.
async fn bind(ext: &Extender, client: &kube::Client, body: &Bytes) -> Response {
    let start = std::time::Instant::now();
    let response = match extender::decode::<ExtenderBindingArgs>(body) {
        Err(message) => {
            tracing::warn!(verb = "bind", %message, "bad request");
            (StatusCode::BAD_REQUEST, format!("bind: {message}\n")).into_response()
        }
        Ok(args) => {
            let error = match crate::api::bind(client, ext, &args).await {
                Ok(()) => {
                    ext.metrics.decided("bound", 1);
                    tracing::info!(pod = %args.pod_name, namespace = %args.pod_namespace, node = %args.node, "bound");
                    String::new()
                }
                Err(e) => {
                    ext.metrics.decided("bind_failed", 1);
                    tracing::warn!(error = %e, "bind failed");
                    e
                }
            };
            let answer = ExtenderBindingResult { error };
            ([(header::CONTENT_TYPE, "application/json")], extender::encode(&answer)).into_response()
        }
    };
    ext.metrics.answered("bind", response.status().as_u16(), start.elapsed().as_secs_f64());
    response
}

fn dispatch(ext: &Extender, verb: &str, body: &Bytes) -> Response {
    match verb {
        "filter" => ext.answer(verb, body, |c, args: ExtenderArgs, m| {
            let r = verbs::filter(c, args)?;
            let passed = r.node_names.as_ref().map_or_else(
                || r.nodes.as_ref().and_then(|n| n.get("items")).and_then(|i| i.as_array()).map_or(0, Vec::len),
                Vec::len,
            );
            m.decided("passed", passed as u64);
            m.decided("failed", r.failed_nodes.as_ref().map_or(0, |f| f.len()) as u64);
            m.decided("unresolvable", r.failed_and_unresolvable_nodes.as_ref().map_or(0, |f| f.len()) as u64);
            Ok(r)
        }),
        "prioritize" => ext.answer(verb, body, |c, args: ExtenderArgs, _| verbs::prioritize(c, args)),
        "preempt" => ext.answer(verb, body, |c, args: ExtenderPreemptionArgs, m| {
            let r = verbs::preempt(c, &args)?;
            m.decided("preemption_nodes", r.node_name_to_meta_victims.as_ref().map_or(0, |v| v.len()) as u64);
            Ok(r)
        }),
        _ => ext.answer(verb, body, |_, args: ExtenderBindingArgs, m| {
            // Binding goes through the API server: without a connection to one, say so.
            m.decided("bind_refused", 1);
            Ok(ExtenderBindingResult {
                error: format!(
                    "gpol extender: cannot bind pod {}/{}: it has no connection to the API server",
                    args.pod_namespace, args.pod_name
                ),
            })
        }),
    }
}

/// Serves until `shutdown` completes, then finishes the requests in flight. The policy
/// file is looked at every `options.reload_every` meanwhile.
pub async fn serve(
    extender: Arc<Extender>,
    listener: tokio::net::TcpListener,
    options: Options,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let watcher = {
        let ext = Arc::clone(&extender);
        let every = options.reload_every;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let ext = Arc::clone(&ext);
                // Compiling takes a while: off the request threads.
                let _ = tokio::task::spawn_blocking(move || ext.reload()).await;
            }
        })
    };
    let app = router(extender, &options);
    let served = axum::serve(listener, app).with_graceful_shutdown(shutdown).await;
    watcher.abort();
    served
}

/// Ctrl-C or SIGTERM (what the kubelet sends to stop a pod).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutting down: finishing requests in flight");
}
