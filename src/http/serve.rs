//! The connection loop of `mess serve`: HTTP/1.1 over hyper with every connection bounded. A
//! client gets a few seconds to send each request's headers (which also ends keep-alive
//! connections that sit idle), header bytes are capped, and the server holds at most a set
//! number of connections: past it, new ones are closed at once instead of queueing behind
//! clients that send nothing, so half-open connections cannot keep `/healthz` from answering.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Bounds on connections.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Most connections open at once.
    pub max_connections: usize,
    /// Longest wait for a request's headers, counted from the moment the connection is ready
    /// for them (so it also closes keep-alive connections that stay idle that long).
    pub header_timeout: Duration,
    /// Most bytes of request line and headers buffered for one request.
    pub max_header_bytes: usize,
    /// How long requests in flight may take to finish once the server is told to stop.
    pub drain: Duration,
}

impl Limits {
    /// The documented defaults: 1,024 connections, 10 s for headers (and idle keep-alive),
    /// 64 KiB of headers, 10 s to drain at shutdown.
    pub fn defaults() -> Limits {
        Limits {
            max_connections: 1024,
            header_timeout: Duration::from_secs(10),
            max_header_bytes: 64 * 1024,
            drain: Duration::from_secs(10),
        }
    }
}

/// Serves `app` on `listener` until `stop` is cancelled, then lets requests in flight finish
/// (up to `limits.drain`).
pub async fn serve(listener: TcpListener, app: Router, limits: Limits, stop: CancellationToken) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut connections = tokio::task::JoinSet::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.max_header_bytes.max(8192))
        .keep_alive(true);
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            // Finished connections are reaped as they end, so the set holds open ones only.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => accepted,
        };
        let (socket, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors and the like: pause rather than spin.
                tracing::warn!(error = %e, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!(
                peer = %peer,
                limit = limits.max_connections,
                "too many connections; closing this one"
            );
            drop(socket);
            continue;
        };
        let _ = socket.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let connection = builder.serve_connection(TokioIo::new(socket), service);
        let stop = stop.clone();
        connections.spawn(async move {
            let _slot = slot;
            let mut connection = std::pin::pin!(connection.with_upgrades());
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(peer = %peer, error = %e, "connection ended");
                    }
                }
                () = stop.cancelled() => {
                    // Finish the request in flight, then close.
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.as_mut().await;
                }
            }
        });
    }
    let drained = tokio::time::timeout(limits.drain, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!("requests still running at shutdown were cut off");
        connections.abort_all();
    }
}
