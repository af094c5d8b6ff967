//! `gpolc serve`: the extender over HTTP. kube-scheduler POSTs each verb to
//! `urlPrefix/<verb>`; any prefix is accepted, the verb being the last path segment.
//! `/healthz`, `/readyz` and `/metrics` are for the kubelet and Prometheus. With leader
//! election ([`crate::leader`]) a replica is ready and binds only while it leads.
//!
//! Every request is bounded and every refusal says why in its body: a body declared or
//! found larger than the limit is refused (413) before it is read whole, a content type
//! other than JSON is 415, a request not answered within the time limit is 408 (heavy
//! work, or work that would wait for the cluster's lock, runs off the connection's
//! thread, so the deadline holds however heavy the request),
//! malformed JSON and requests missing what a verb needs are 400, unknown paths 404 and
//! wrong methods 405; with a token file, a verb without the token is 401. Connections are
//! capped, and their headers and TLS handshakes have a deadline ([`crate::listen`]). The
//! policy file, the TLS files and the token file are watched: a changed policy is checked
//! and compiled aside, then swapped in whole; one that does not check is refused, its
//! diagnostics logged, and the old policy keeps serving.

use crate::cluster::Cluster;
use crate::extender::{self, ExtenderArgs, ExtenderBindingArgs, ExtenderBindingResult, ExtenderPreemptionArgs};
use crate::listen::Connections;
use crate::metrics::Metrics;
use crate::served::Extender;
use crate::tls::{Tls, TlsError, TlsFiles, Token};
use crate::verbs::{self, BadRequest};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use gpol_runtime::decision_log::Verb;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Limits, timings and security of a served extender.
#[derive(Clone, Debug)]
pub struct Options {
    /// The largest request body read (a request sending 5,000 whole Node objects is
    /// about 25 MB).
    pub max_body_bytes: usize,
    /// The longest a request may take (kube-scheduler's own `httpTimeout` is 5 s).
    pub timeout: Duration,
    /// How often the policy, TLS and token files are looked at for changes.
    pub reload_every: Duration,
    /// The longest a connection may take to send a request's headers (an idle
    /// keep-alive connection waiting for its next request included) or its TLS handshake.
    pub header_timeout: Duration,
    /// The most connections open at once.
    pub max_connections: usize,
    /// TLS, when served over HTTPS.
    pub tls: Option<TlsFiles>,
    /// A file holding the bearer token every verb request must carry.
    pub token_file: Option<PathBuf>,
    /// Where to answer health, readiness and metrics over plain HTTP as well, for
    /// probes that cannot present a client certificate ([`health_router`]).
    pub health_listen: Option<std::net::SocketAddr>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            max_body_bytes: 64 << 20,
            timeout: Duration::from_secs(5),
            reload_every: Duration::from_secs(2),
            header_timeout: Duration::from_secs(10),
            max_connections: 256,
            tls: None,
            token_file: None,
            health_listen: None,
        }
    }
}

/// Answers one verb: decodes the request (any key case), runs it on the cluster and
/// encodes the answer; counts and times it.
fn answer<A: DeserializeOwned, R: Serialize>(
    ext: &Extender,
    verb: &str,
    body: &[u8],
    deadline: Instant,
    lock: Lock,
    run: impl FnOnce(&mut Cluster, A, &Metrics) -> Result<R, BadRequest>,
) -> Option<Response> {
    let start = Instant::now();
    let free = match lock {
        Lock::Wait => None,
        Lock::IfFree => Some(ext.try_cluster()?),
    };
    let outcome = extender::decode::<A>(body).map_err(|e| BadRequest(e.to_string())).and_then(|args| {
        let mut cluster = free.unwrap_or_else(|| ext.cluster());
        // Waited too long for the cluster: the client has had its 408 already.
        if Instant::now() >= deadline {
            return Err(BadRequest("no time left to answer".into()));
        }
        cluster.set_clock(ext.clock_ms());
        let answer = run(&mut cluster, args, &ext.metrics);
        ext.metrics.held(&cluster);
        answer
    });
    let response = match outcome {
        Ok(answer) => ([(header::CONTENT_TYPE, "application/json")], extender::encode(&answer)).into_response(),
        Err(BadRequest(message)) => {
            tracing::warn!(verb, %message, "bad request");
            (StatusCode::BAD_REQUEST, format!("{verb}: {message}\n")).into_response()
        }
    };
    ext.metrics.answered(verb, response.status().as_u16(), start.elapsed().as_secs_f64());
    Some(response)
}

/// How a verb takes the cluster's lock.
#[derive(Clone, Copy)]
enum Lock {
    /// Waits for it (on the blocking pool).
    Wait,
    /// Takes it only if it is free now (on the connection's thread, which must never wait).
    IfFree,
}

/// Bodies up to this size (about 10,000 node names) are answered on the connection's own
/// thread when the cluster is free: their work takes a few milliseconds at most, and the
/// hop to the blocking pool would be a good part of a small request's time. Larger ones,
/// and any that would wait for the lock, go to the blocking pool, where a deadline holds
/// however long they take.
const INLINE_BODY_BYTES: usize = 128 << 10;

/// The verbs, by the last segment of the path.
const VERBS: [&str; 4] = ["filter", "prioritize", "preempt", "bind"];

/// What every request is checked against.
struct Limits {
    max_body_bytes: usize,
    timeout: Duration,
    token: Option<Arc<Token>>,
}

/// The router: the verbs under any prefix, health, readiness and metrics, each request
/// within the limits of `options` (without a token: [`serve`] reads the token file).
pub fn router(extender: Arc<Extender>, options: &Options) -> Router {
    with_token(extender, options, None)
}

fn with_token(extender: Arc<Extender>, options: &Options, token: Option<Arc<Token>>) -> Router {
    let limits = Arc::new(Limits { max_body_bytes: options.max_body_bytes, timeout: options.timeout, token });
    Router::new()
        .fallback(move |State(ext): State<Arc<Extender>>, request: Request| {
            let limits = Arc::clone(&limits);
            async move { within_time(ext, request, limits).await }
        })
        .with_state(extender)
}

fn plain(code: StatusCode, text: String) -> Response {
    (code, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
}

/// The request answered, or 408 when the time limit passes first.
async fn within_time(ext: Arc<Extender>, request: Request, limits: Arc<Limits>) -> Response {
    let verb = request.uri().path().rsplit('/').next().unwrap_or_default().to_string();
    let timeout = limits.timeout;
    match tokio::time::timeout(timeout, route(Arc::clone(&ext), request, limits)).await {
        Ok(response) => response,
        Err(_) => {
            if VERBS.contains(&verb.as_str()) {
                ext.metrics.answered(&verb, 408, timeout.as_secs_f64());
            }
            plain(
                StatusCode::REQUEST_TIMEOUT,
                format!("{verb}: not answered within the time limit of {timeout:?} (--timeout)\n"),
            )
        }
    }
}

/// A `405` saying which method `path` takes.
fn wrong_method(path: &str, method: &Method, allow: &'static str) -> Response {
    let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, format!("`{path}` answers {allow} only, not {method}\n"));
    r.headers_mut().insert(header::ALLOW, header::HeaderValue::from_static(allow));
    r
}

/// Health, readiness and metrics, or `None` for another path.
fn health(ext: &Extender, path: &str, method: &Method) -> Option<Response> {
    Some(match path {
        "/healthz" | "/readyz" | "/metrics" if method != Method::GET => wrong_method(path, method, "GET"),
        "/healthz" => plain(StatusCode::OK, "ok\n".into()),
        // A replica that does not lead stays out of the Service's endpoints.
        "/readyz" if ext.leadership().is_some_and(|l| !l.is_leader()) => {
            plain(StatusCode::SERVICE_UNAVAILABLE, "not the leader\n".into())
        }
        "/readyz" if ext.is_ready() => plain(StatusCode::OK, "ready\n".into()),
        "/readyz" => plain(StatusCode::SERVICE_UNAVAILABLE, "the cluster's state is not known yet\n".into()),
        "/metrics" => {
            let kind = "application/openmetrics-text; version=1.0.0; charset=utf-8";
            ([(header::CONTENT_TYPE, kind)], ext.metrics.render()).into_response()
        }
        _ => return None,
    })
}

/// The router of the health port (`--health-listen`): health, readiness and metrics over
/// plain HTTP, for probes and Prometheus that cannot present the client certificate the
/// verbs' port asks for. No verb is answered there.
pub fn health_router(extender: Arc<Extender>) -> Router {
    Router::new()
        .fallback(|State(ext): State<Arc<Extender>>, request: Request| async move {
            let path = request.uri().path().to_string();
            health(&ext, &path, request.method()).unwrap_or_else(|| {
                let text = format!("`{path}`: this port answers /healthz, /readyz and /metrics only\n");
                plain(StatusCode::NOT_FOUND, text)
            })
        })
        .with_state(extender)
}

async fn route(ext: Arc<Extender>, request: Request, limits: Arc<Limits>) -> Response {
    let deadline = Instant::now() + limits.timeout;
    let path = request.uri().path().to_string();
    let method = request.method().clone();
    if let Some(answer) = health(&ext, &path, &method) {
        return answer;
    }
    let verb = path.rsplit('/').next().unwrap_or_default().to_string();
    if !VERBS.contains(&verb.as_str()) {
        let known = VERBS.join(", ");
        return plain(StatusCode::NOT_FOUND, format!("unknown verb at `{path}`: the verbs are {known} (POST)\n"));
    }
    if method != Method::POST {
        return wrong_method(&path, &method, "POST");
    }
    let refused = |code: StatusCode, text: String| {
        ext.metrics.answered(&verb, code.as_u16(), 0.0);
        tracing::warn!(verb, %text, "request refused");
        plain(code, format!("{verb}: {text}\n"))
    };
    if let Some(token) = &limits.token
        && !token.admits(request.headers().get(header::AUTHORIZATION).map(|v| v.as_bytes()))
    {
        let mut r = refused(StatusCode::UNAUTHORIZED, "no valid bearer token (Authorization: Bearer …)".into());
        r.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
        return r;
    }
    if let Some(wrong) = not_json(request.headers()) {
        return refused(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("the content type is `{wrong}`, not application/json"),
        );
    }
    let limit = limits.max_body_bytes;
    let too_large = || format!("the request body is larger than the limit of {limit} bytes (--max-body)");
    let declared = request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return refused(StatusCode::PAYLOAD_TOO_LARGE, too_large());
    }
    let body = match axum::body::to_bytes(request.into_body(), limit).await {
        Ok(b) => b,
        Err(_) => return refused(StatusCode::PAYLOAD_TOO_LARGE, too_large()),
    };
    match (verb.as_str(), ext.api().cloned()) {
        ("bind", Some(client)) => {
            // Run apart: a bind cut short by the time limit would leave its reservation
            // behind; finished on its own, it binds or gives the place back.
            let ext = Arc::clone(&ext);
            match tokio::spawn(async move { bind(&ext, &client, &body).await }).await {
                Ok(response) => response,
                Err(e) => plain(StatusCode::INTERNAL_SERVER_ERROR, format!("bind: {e}\n")),
            }
        }
        _ => {
            if body.len() <= INLINE_BODY_BYTES
                && let Some(response) = dispatch(&ext, &verb, &body, deadline, Lock::IfFree)
            {
                return response;
            }
            // Heavy, or the cluster busy: off the connection's thread, so the deadline holds.
            let asked = verb.clone();
            let work = tokio::task::spawn_blocking(move || dispatch(&ext, &asked, &body, deadline, Lock::Wait));
            match work.await {
                Ok(Some(response)) => response,
                // Waiting for the lock, it always answers.
                Ok(None) => plain(StatusCode::INTERNAL_SERVER_ERROR, format!("{verb}: not answered\n")),
                Err(e) => plain(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
            }
        }
    }
}

/// The content type when it is given and is not JSON.
fn not_json(headers: &HeaderMap) -> Option<String> {
    let kind = headers.get(header::CONTENT_TYPE)?;
    let text = String::from_utf8_lossy(kind.as_bytes()).into_owned();
    let essence = text.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    (essence != "application/json").then_some(text)
}

/// bind, through the API server.
async fn bind(ext: &Extender, client: &kube::Client, body: &Bytes) -> Response {
    let start = std::time::Instant::now();
    let args = extender::decode::<ExtenderBindingArgs>(body).and_then(|a| match a.missing() {
        Some(field) => Err(extender::DecodeError::Missing(field)),
        None => Ok(a),
    });
    let response = match args {
        Err(message) => {
            tracing::warn!(verb = "bind", %message, "bad request");
            plain(StatusCode::BAD_REQUEST, format!("bind: {message}\n"))
        }
        Ok(args) => {
            let error = match ext.leadership().map(|l| l.may_bind()) {
                // Refused before anything is read, reserved or written.
                Some(Err(why)) => {
                    ext.metrics.decided("bind_not_leader", 1);
                    tracing::info!(pod = %args.pod_name, namespace = %args.pod_namespace, %why, "bind refused");
                    format!("gpol extender: cannot bind pod {}/{}: {why}", args.pod_namespace, args.pod_name)
                }
                _ => match crate::api::bind(client, ext, &args).await {
                    Ok(()) => {
                        ext.metrics.decided("bound", 1);
                        tracing::info!(pod = %args.pod_name, namespace = %args.pod_namespace, node = %args.node, "bound");
                        String::new()
                    }
                    Err(e) => {
                        ext.metrics.decided("bind_failed", 1);
                        tracing::warn!(error = %e, "bind failed");
                        e.to_string()
                    }
                },
            };
            let answer = ExtenderBindingResult { error };
            ([(header::CONTENT_TYPE, "application/json")], extender::encode(&answer)).into_response()
        }
    };
    ext.metrics.answered("bind", response.status().as_u16(), start.elapsed().as_secs_f64());
    response
}

fn dispatch(ext: &Extender, verb: &str, body: &Bytes, deadline: Instant, lock: Lock) -> Option<Response> {
    match verb {
        "filter" => answer(ext, verb, body, deadline, lock, |c, args: ExtenderArgs, m| {
            let asked = ext.logs_decisions().then(|| (args.pod.clone(), verbs::asked_names(&args)));
            let r = verbs::filter(c, args)?;
            if let Some((Some(pod), names)) = asked {
                log_asked(ext, c, Verb::Filter, body, &pod, &names, false);
            }
            let passed = r.node_names.as_ref().map_or_else(
                || r.nodes.as_ref().and_then(|n| n.get("items")).and_then(|i| i.as_array()).map_or(0, Vec::len),
                Vec::len,
            );
            m.decided("passed", passed as u64);
            m.decided("failed", r.failed_nodes.as_ref().map_or(0, |f| f.len()) as u64);
            m.decided("unresolvable", r.failed_and_unresolvable_nodes.as_ref().map_or(0, |f| f.len()) as u64);
            Ok(r)
        }),
        "prioritize" => answer(ext, verb, body, deadline, lock, |c, args: ExtenderArgs, _| {
            let asked = ext.logs_decisions().then(|| (args.pod.clone(), verbs::asked_names(&args)));
            let r = verbs::prioritize(c, args)?;
            if let Some((Some(pod), names)) = asked {
                log_asked(ext, c, Verb::Prioritize, body, &pod, &names, false);
            }
            Ok(r)
        }),
        "preempt" => answer(ext, verb, body, deadline, lock, |c, args: ExtenderPreemptionArgs, m| {
            let r = verbs::preempt(c, &args)?;
            if ext.logs_decisions()
                && let Some(pod) = &args.pod
            {
                let names = verbs::proposed_nodes(&args);
                log_asked(ext, c, Verb::Preempt, body, pod, &names, true);
            }
            m.decided("preemption_nodes", r.node_name_to_meta_victims.as_ref().map_or(0, |v| v.len()) as u64);
            Ok(r)
        }),
        _ => answer(ext, verb, body, deadline, lock, |_, args: ExtenderBindingArgs, m| {
            if let Some(field) = args.missing() {
                return Err(BadRequest(format!("the request has no `{field}`")));
            }
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

/// Logs the account of a pod asked about over the named nodes (with the victim search
/// when `search`). A pod that cannot be mapped was answered as such: no decision to log.
fn log_asked(ext: &Extender, c: &mut Cluster, verb: Verb, body: &[u8], pod: &Value, names: &[String], search: bool) {
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    if let Ok((job, account)) = c.account(pod, &names, search) {
        ext.log_decision(c, verb, &job, body, account);
    }
}

/// The files `serve` reads besides the policy, loaded.
struct Security {
    tls: Option<Arc<Tls>>,
    token: Option<Arc<Token>>,
}

impl Security {
    fn load(options: &Options) -> Result<Security, TlsError> {
        let tls = options.tls.clone().map(Tls::load).transpose()?.map(Arc::new);
        let token = options.token_file.clone().map(Token::load).transpose()?.map(Arc::new);
        Ok(Security { tls, token })
    }
}

/// Serves until `shutdown` completes, then finishes the requests in flight. The policy,
/// TLS and token files are looked at every `options.reload_every` meanwhile. An error
/// when a TLS or token file cannot be used.
pub async fn serve(
    extender: Arc<Extender>,
    listener: tokio::net::TcpListener,
    options: Options,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let Security { tls, token } =
        Security::load(&options).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let watcher = {
        let (ext, tls, token) = (Arc::clone(&extender), tls.clone(), token.clone());
        let every = options.reload_every;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let (ext, tls, token) = (Arc::clone(&ext), tls.clone(), token.clone());
                // Compiling takes a while: off the request threads.
                let _ = tokio::task::spawn_blocking(move || {
                    ext.reload();
                    reload_security(tls.as_deref(), token.as_deref());
                })
                .await;
            }
        })
    };
    let health = match options.health_listen {
        None => None,
        Some(at) => {
            let listener = tokio::net::TcpListener::bind(at).await?;
            // A few connections: the kubelet's probes and Prometheus.
            let connections = Connections { max: 16, header_timeout: options.header_timeout, tls: None };
            let app = health_router(Arc::clone(&extender));
            Some(tokio::spawn(crate::listen::serve(listener, app, connections, std::future::pending())))
        }
    };
    let app = with_token(extender, &options, token);
    let connections = Connections { max: options.max_connections, header_timeout: options.header_timeout, tls };
    let served = crate::listen::serve(listener, app, connections, shutdown).await;
    watcher.abort();
    if let Some(health) = health {
        health.abort();
    }
    served
}

/// Reads the TLS and token files again; a change that cannot be used is logged and the
/// files in force stay.
fn reload_security(tls: Option<&Tls>, token: Option<&Token>) {
    match tls.map(Tls::reload) {
        Some(Ok(true)) => tracing::info!("TLS certificate reloaded"),
        Some(Err(e)) => tracing::error!(error = %e, "TLS files refused; the previous ones keep serving"),
        _ => {}
    }
    match token.map(Token::reload) {
        Some(Ok(true)) => tracing::info!("bearer token reloaded"),
        Some(Err(e)) => tracing::error!(error = %e, "token file refused; the previous token stays"),
        _ => {}
    }
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
