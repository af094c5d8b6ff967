//! `gpolc serve`: a policy as a kube-scheduler extender over HTTP (docs/kubernetes.md).
//! The library does the work (`gpol_kubernetes::served`, `gpol_kubernetes::server`);
//! this sets up logging, the runtime and the listener.

use super::{CliError, OK};
use gpol_compiler::engine::EngineKind;
use gpol_kubernetes::api;
use gpol_kubernetes::leader::{self, Election, Leadership};
use gpol_kubernetes::served::Extender;
use gpol_kubernetes::server::{self, Options};
use gpol_kubernetes::tls::TlsFiles;
use gpol_runtime::decision_log::Writer;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// The policy file (watched: a changed file that checks replaces the policy served).
    policy: PathBuf,
    /// The address to listen on (kube-scheduler's `urlPrefix` points here).
    #[arg(long, default_value = "127.0.0.1:8888")]
    listen: SocketAddr,
    /// The largest request body accepted, in bytes.
    #[arg(long, default_value_t = Options::default().max_body_bytes)]
    max_body: usize,
    /// The longest a request may take, in seconds.
    #[arg(long, default_value_t = 5.0)]
    timeout: f64,
    /// How often to look at the policy, TLS and token files for changes, in seconds.
    #[arg(long, default_value_t = 2.0)]
    reload_every: f64,
    /// The longest a connection may take to send a request's headers or its TLS
    /// handshake, and stay idle between requests, in seconds.
    #[arg(long, default_value_t = 10.0)]
    header_timeout: f64,
    /// The most connections open at once (more wait to be accepted).
    #[arg(long, default_value_t = Options::default().max_connections)]
    max_connections: usize,
    /// Serve HTTPS with this certificate chain (PEM; reloaded when it changes). Needs --tls-key.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM; reloaded when it changes).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Ask every client for a certificate signed by one of these CAs (PEM), as
    /// kube-scheduler's extender `tlsConfig` (certFile, keyFile) sends one. Needs --tls-cert.
    #[arg(long, requires = "tls_cert")]
    client_ca: Option<PathBuf>,
    /// Every verb request must carry the bearer token in this file (its first line).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Also answer /healthz, /readyz and /metrics over plain HTTP here (for probes that
    /// cannot present the client certificate --client-ca asks for). No verb is served there.
    #[arg(long)]
    health_listen: Option<SocketAddr>,
    /// Do not connect to the API server: nodes come whole in each request
    /// (`nodeCacheCapable: false`), pods are not watched, `bind` is refused.
    #[arg(long)]
    no_api: bool,
    #[command(flatten)]
    lease: Lease,
    /// Append every decision (filter, prioritize, preempt, bind) to FILE as a JSON line:
    /// the policy's digest, the request's, the pod and what the decision saw. `gpolc
    /// explain --log FILE POD` shows one.
    #[arg(long, value_name = "FILE")]
    decision_log: Option<PathBuf>,
    /// Log as JSON lines (for log collectors) rather than text.
    #[arg(long)]
    log_json: bool,
    /// Which engine runs the policy.
    #[arg(long, value_enum, default_value = "jit")]
    engine: EngineKind,
}

/// Leader election between replicas.
#[derive(clap::Args)]
struct Lease {
    /// Run as one of several replicas: only the holder of a coordination.k8s.io Lease
    /// binds and is ready; the others answer filter, prioritize and preempt.
    #[arg(long, conflicts_with = "no_api")]
    leader_elect: bool,
    /// The Lease competed for.
    #[arg(long, default_value = "gpol-extender", requires = "leader_elect")]
    lease_name: String,
    /// The Lease's namespace (default: the pod's own, else `default`).
    #[arg(long, requires = "leader_elect")]
    lease_namespace: Option<String>,
    /// This replica's name in the Lease (default: the pod's name, from HOSTNAME, and a
    /// random suffix).
    #[arg(long, requires = "leader_elect")]
    lease_identity: Option<String>,
    /// Seconds the lease holds after each renewal: the longest a crashed leader keeps it.
    #[arg(long, default_value_t = 15, requires = "leader_elect")]
    lease_duration: u64,
    /// Seconds before the lease's end the leader renews it.
    #[arg(long, default_value_t = 5, requires = "leader_elect")]
    lease_grace: u64,
}

pub fn run(args: Args) -> Result<u8, CliError> {
    init_logs(args.log_json);
    let seconds = |s: f64, flag: &str| {
        if s.is_finite() && s > 0.0 && s <= 86_400.0 {
            Ok(Duration::from_secs_f64(s))
        } else {
            Err(format!("--{flag}: expected seconds between 0 and 86400, found {s}"))
        }
    };
    let durations = (
        seconds(args.timeout, "timeout"),
        seconds(args.reload_every, "reload-every"),
        seconds(args.header_timeout, "header-timeout"),
    );
    let options = match durations {
        (Ok(timeout), Ok(reload_every), Ok(header_timeout)) => Options {
            max_body_bytes: args.max_body,
            timeout,
            reload_every,
            header_timeout,
            max_connections: args.max_connections,
            tls: args.tls_cert.zip(args.tls_key).map(|(cert, key)| TlsFiles { cert, key, client_ca: args.client_ca }),
            token_file: args.token_file,
            health_listen: args.health_listen,
        },
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return Err(CliError::usage(e)),
    };
    if options.max_connections == 0 {
        return Err(CliError::usage("--max-connections: at least 1"));
    }
    let election =
        args.lease.leader_elect.then(|| election(&args.lease, options.timeout)).transpose().map_err(CliError::usage)?;
    let decision_log = args
        .decision_log
        .as_deref()
        .map(|p| Writer::open(p, &[&args.policy]))
        .transpose()
        .map_err(|e| CliError::usage(format!("--decision-log: {e}")))?;
    let extender = match Extender::load(args.policy.clone(), args.engine) {
        Ok(mut e) => {
            if let Some(log) = decision_log {
                e = e.with_decision_log(log);
            }
            match &election {
                Some((leadership, _)) => Arc::new(e.with_leadership(Arc::clone(leadership))),
                None => Arc::new(e),
            }
        }
        Err(diagnostics) => {
            eprint!("{diagnostics}");
            return Err(CliError::failed(format!("{} cannot be served", args.policy.display())));
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(format!("cannot start the server's runtime: {e}")))?;
    runtime.block_on(async move {
        let client = if args.no_api {
            // The nodes come whole in each request: nothing to wait for.
            extender.set_ready(true);
            None
        } else {
            match api::connect().await {
                Ok(client) => {
                    extender.connect(client.clone());
                    tokio::spawn(api::watch(client.clone(), Arc::clone(&extender)));
                    Some(client)
                }
                Err(e) => {
                    return Err(CliError::failed(format!("cannot reach the API server: {e}"))
                        .with_hint("--no-api serves without it: nodes sent whole in each request, no bind"));
                }
            }
        };
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .map_err(|e| CliError::failed(format!("cannot listen on {}: {e}", args.listen)))?;
        let election = match (election, client) {
            (Some((leadership, settings)), Some(client)) => {
                let started = Election::start(client, &settings, leadership).await;
                Some(started.map_err(|e| CliError::failed(format!("cannot compete for the leader lease: {e}")))?)
            }
            _ => None,
        };
        // On SIGTERM a leader stops binding, then gives its lease up (the next leader
        // need not wait for it to run out), then the requests in flight are finished.
        let shutdown = async move {
            server::shutdown_signal().await;
            if let Some(election) = election {
                election.resign().await;
            }
        };
        tracing::info!(listen = %args.listen, policy = %args.policy.display(), "serving");
        server::serve(extender, listener, options, shutdown)
            .await
            .map(|()| OK)
            .map_err(|e| CliError::failed(format!("the server stopped: {e}")))
    })
}

/// `--leader-elect`'s leadership (binding from `settle` after each election: the
/// longest a bind may take) and the lease competed for; or what is wrong with the flags.
fn election(args: &Lease, settle: Duration) -> Result<(Arc<Leadership>, leader::Settings), String> {
    let settings = leader::Settings {
        lease: args.lease_name.clone(),
        namespace: args.lease_namespace.clone().unwrap_or_else(leader::own_namespace),
        duration: args.lease_duration,
        grace: args.lease_grace,
    };
    settings.check().map_err(|e| format!("--lease-duration, --lease-grace: {e}"))?;
    let identity = args.lease_identity.clone().unwrap_or_else(leader::default_identity);
    leader::check_identity(&identity).map_err(|e| format!("--lease-identity: {e}"))?;
    Ok((Arc::new(Leadership::new(identity, settle)), settings))
}

/// Structured logs on standard error; `RUST_LOG` chooses the levels (default: gpol's
/// own at `info`, its libraries' at `warn`). Cranelift logs every function it compiles
/// at `info`: it stays at `warn` unless `RUST_LOG` names it. Colours only on a terminal.
fn init_logs(json: bool) {
    let asked = std::env::var("RUST_LOG").ok().filter(|v| !v.trim().is_empty());
    let directives = match asked {
        Some(v) if v.contains("cranelift") => v,
        Some(v) => format!(
            "{v},cranelift_codegen=warn,cranelift_jit=warn,cranelift_frontend=warn,cranelift_module=warn,regalloc2=warn"
        ),
        None => "warn,gpolc=info,gpol_kubernetes=info".to_string(),
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&directives)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,gpolc=info,gpol_kubernetes=info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let _ = if json { builder.json().try_init() } else { builder.try_init() };
}
