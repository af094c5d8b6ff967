//! The served extender's connections: accepted while fewer than the cap are open (the
//! rest wait in the kernel's backlog, so descriptors never run out and a policy reload can
//! always open its file), wrapped in TLS when configured, and each served over HTTP/1.1
//! with a deadline on every request's headers — a client that sends them slowly, or keeps
//! an idle connection open, is disconnected when it passes. On shutdown no new connection
//! is accepted and the requests in flight are finished.

use crate::tls::Tls;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// How connections are taken.
#[derive(Clone)]
pub struct Connections {
    /// The most connections open at once.
    pub max: usize,
    /// The longest a connection may take to send a request's headers, counted from when
    /// the server starts waiting for them (an idle keep-alive connection included), and
    /// to finish the TLS handshake.
    pub header_timeout: Duration,
    pub tls: Option<Arc<Tls>>,
}

/// How long shutdown waits for requests in flight.
const DRAIN: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until `shutdown` completes, then finishes the requests in
/// flight (for at most ten seconds).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    connections: Connections,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(connections.max.max(1)));
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = Arc::clone(&permits).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of descriptors or the like: wait a moment rather than spin.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let (app, timeout, watcher) = (app.clone(), connections.header_timeout, graceful.watcher());
        let tls = connections.tls.as_ref().map(|t| t.acceptor());
        tokio::spawn(async move {
            // The permit is held as long as the connection is open.
            let _permit = permit;
            match tls {
                None => serve_one(TokioIo::new(stream), app, timeout, watcher).await,
                Some(acceptor) => match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => serve_one(TokioIo::new(stream), app, timeout, watcher).await,
                    Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                    Err(_) => tracing::debug!("TLS handshake too slow"),
                },
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN, graceful.shutdown()).await.is_err() {
        tracing::warn!("requests still in flight after {DRAIN:?}: stopping anyway");
    }
    Ok(())
}

async fn serve_one<I>(
    io: TokioIo<I>,
    app: Router,
    header_timeout: Duration,
    watcher: hyper_util::server::graceful::Watcher,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(header_timeout).keep_alive(true);
    let connection = http.serve_connection(io, TowerToHyperService::new(app));
    if let Err(e) = watcher.watch(connection).await {
        tracing::debug!(error = %e, "connection closed");
    }
}
