//! The connection loop of `mess serve`: HTTP/1.1 over hyper with every connection bounded. A
//! client gets a few seconds to send each request's headers (which also ends keep-alive
//! connections that sit idle), header bytes are capped, and the server holds at most a set
//! number of connections. When it is full, the oldest connection that never finished a
//! request's headers makes room for the newcomer, so clients that open connections and send
//! nothing (or dribble their headers) cannot keep anyone else out; only when every connection
//! has sent a request is a newcomer turned away.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Bounds on connections.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
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
    pub(crate) fn defaults() -> Limits {
        Limits {
            max_connections: 1024,
            header_timeout: Duration::from_secs(10),
            max_header_bytes: 64 * 1024,
            drain: Duration::from_secs(10),
        }
    }
}

/// One open connection, as the loop sees it.
struct Open {
    since: Instant,
    /// Set once the connection has sent a whole request head.
    served: Arc<AtomicBool>,
    /// Closes the connection at once.
    evict: CancellationToken,
}

/// The open connections, by number.
#[derive(Default)]
struct Registry {
    open: Mutex<HashMap<u64, Open>>,
}

impl Registry {
    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Open>> {
        match self.open.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Makes room for one more connection under `max`: closes the oldest connection that has
    /// not sent a request yet; false when every connection has.
    fn make_room(&self, max: usize) -> bool {
        let mut open = self.open();
        if open.len() < max {
            return true;
        }
        let oldest_silent = open
            .iter()
            .filter(|(_, c)| !c.served.load(Ordering::Relaxed))
            .min_by_key(|(_, c)| c.since)
            .map(|(id, _)| *id);
        match oldest_silent.and_then(|id| open.remove(&id)) {
            Some(victim) => {
                victim.evict.cancel();
                true
            }
            None => false,
        }
    }
}

/// The app as hyper calls it, noting that the connection has sent a request.
#[derive(Clone)]
struct Noting {
    inner: TowerToHyperService<Router>,
    served: Arc<AtomicBool>,
}

impl hyper::service::Service<hyper::Request<Incoming>> for Noting {
    type Response = <TowerToHyperService<Router> as hyper::service::Service<
        hyper::Request<Incoming>,
    >>::Response;
    type Error =
        <TowerToHyperService<Router> as hyper::service::Service<hyper::Request<Incoming>>>::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn call(&self, request: hyper::Request<Incoming>) -> Self::Future {
        self.served.store(true, Ordering::Relaxed);
        Box::pin(self.inner.call(request))
    }
}

/// Serves `app` on `listener` until `stop` is cancelled, then lets requests in flight finish
/// (up to `limits.drain`).
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    stop: CancellationToken,
) {
    let registry = Arc::new(Registry::default());
    let mut connections = tokio::task::JoinSet::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.max_header_bytes.max(8192))
        .keep_alive(true);
    let mut next_id: u64 = 0;
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
        if !registry.make_room(limits.max_connections) {
            tracing::warn!(
                peer = %peer,
                limit = limits.max_connections,
                "every connection is busy; closing this one"
            );
            drop(socket);
            continue;
        }
        let _ = socket.set_nodelay(true);
        next_id += 1;
        let id = next_id;
        let served = Arc::new(AtomicBool::new(false));
        let evict = CancellationToken::new();
        registry.open().insert(
            id,
            Open {
                since: Instant::now(),
                served: served.clone(),
                evict: evict.clone(),
            },
        );
        let service = Noting {
            inner: TowerToHyperService::new(app.clone()),
            served,
        };
        let connection = builder.serve_connection(TokioIo::new(socket), service);
        let (stop, registry) = (stop.clone(), registry.clone());
        connections.spawn(async move {
            let mut connection = std::pin::pin!(connection.with_upgrades());
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(peer = %peer, error = %e, "connection ended");
                    }
                }
                () = evict.cancelled() => {
                    tracing::debug!(peer = %peer, "closed a silent connection to make room");
                }
                () = stop.cancelled() => {
                    // Finish the request in flight, then close.
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.as_mut().await;
                }
            }
            registry.open().remove(&id);
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
