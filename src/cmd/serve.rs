//! `gpolc serve`: a policy as a kube-scheduler extender over HTTP (docs/kubernetes.md).
//! The library does the work (`gpol_kubernetes::server`); this sets up logging, the
//! runtime and the listener.

use super::{FAILED, OK, USAGE};
use gpol_compiler::engine::EngineKind;
use gpol_kubernetes::api;
use gpol_kubernetes::server::{self, Extender, Options};
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
    /// How often to look at the policy file for changes, in seconds.
    #[arg(long, default_value_t = 2.0)]
    reload_every: f64,
    /// Do not connect to the API server: nodes come whole in each request
    /// (`nodeCacheCapable: false`), pods are not watched, `bind` is refused.
    #[arg(long)]
    no_api: bool,
    /// Log as JSON lines (for log collectors) rather than text.
    #[arg(long)]
    log_json: bool,
    /// Which engine runs the policy.
    #[arg(long, value_enum, default_value = "jit")]
    engine: EngineKind,
}

pub fn run(args: Args) -> u8 {
    init_logs(args.log_json);
    let seconds = |s: f64, flag: &str| {
        if s.is_finite() && s > 0.0 && s <= 86_400.0 {
            Ok(Duration::from_secs_f64(s))
        } else {
            Err(format!("--{flag}: expected seconds between 0 and 86400, found {s}"))
        }
    };
    let options = match (seconds(args.timeout, "timeout"), seconds(args.reload_every, "reload-every")) {
        (Ok(timeout), Ok(reload_every)) => Options { max_body_bytes: args.max_body, timeout, reload_every },
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {e}");
            return USAGE;
        }
    };
    let extender = match Extender::load(args.policy.clone(), args.engine) {
        Ok(e) => Arc::new(e),
        Err(diagnostics) => {
            eprint!("{diagnostics}");
            eprintln!("error: {} cannot be served", args.policy.display());
            return FAILED;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the server's runtime: {e}");
            return FAILED;
        }
    };
    runtime.block_on(async move {
        if args.no_api {
            // The nodes come whole in each request: nothing to wait for.
            extender.set_ready(true);
        } else {
            match api::connect().await {
                Ok(client) => {
                    extender.connect(client.clone());
                    tokio::spawn(api::watch(client, Arc::clone(&extender)));
                }
                Err(e) => {
                    eprintln!("error: cannot reach the API server: {e}");
                    eprintln!("(--no-api serves without it: nodes sent whole in each request, no bind)");
                    return FAILED;
                }
            }
        }
        let listener = match tokio::net::TcpListener::bind(args.listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("error: cannot listen on {}: {e}", args.listen);
                return FAILED;
            }
        };
        tracing::info!(listen = %args.listen, policy = %args.policy.display(), "serving");
        match server::serve(extender, listener, options, server::shutdown_signal()).await {
            Ok(()) => OK,
            Err(e) => {
                eprintln!("error: the server stopped: {e}");
                FAILED
            }
        }
    })
}

/// Structured logs on standard error; `RUST_LOG` chooses the levels (default: gpol's
/// own at `info`, its libraries' at `warn`).
fn init_logs(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,gpolc=info,gpol_kubernetes=info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = if json { builder.json().try_init() } else { builder.try_init() };
}
