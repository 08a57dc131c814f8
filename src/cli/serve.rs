//! `mess serve`: the exchange server (HTTP API) on one address, until Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::cli::{CliError, Context, output};
use crate::exchange::background;
use crate::notify::Notifier;

/// How often the router looks again at every pending thread nobody could take yet
/// (`MESS_ROUTE_RETRY_MS` overrides it; its former name `MESS_DISPATCH_RETRY_MS` is still read).
const ROUTE_RETRY: std::time::Duration = std::time::Duration::from_secs(15);

pub(crate) fn route_retry() -> std::time::Duration {
    output::env_millis("MESS_ROUTE_RETRY_MS")
        .or_else(|| output::env_millis("MESS_DISPATCH_RETRY_MS"))
        .unwrap_or(ROUTE_RETRY)
}

/// Arguments of `mess serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on; anything but loopback exposes the API (every route but /healthz
    /// needs a key or a link either way)
    /// [default: 127.0.0.1:8420, or `http.port` of config.yaml on 127.0.0.1]
    #[arg(long, env = "MESS_ADDR", value_name = "HOST:PORT")]
    addr: Option<SocketAddr>,
}

pub(crate) fn run(cx: &Context, args: ServeArgs) -> Result<(), CliError> {
    output::start_logging("info");
    // A first run on a machine with no home makes one, and says so (stderr: stdout's first line
    // is the address, which scripts read).
    let home = &cx.config.home;
    if !home.join("config.yaml").exists() && !home.join("state=received").exists() {
        cx.exchange.upkeep().init_home(None)?;
        output::err(&format!(
            "made a new exchange home at {}; `mess init` adds an example config.yaml with executors\n",
            home.display()
        ));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::new(format!("cannot start the server runtime: {e}")))?;
    let _one_server = cx
        .exchange
        .upkeep()
        .serve_lock()
        .map_err(|e| CliError::new(format!("cannot take the server lock: {e}")))?
        .ok_or_else(|| {
            CliError::with_hint(
                "another mess serve runs on this home",
                "stop it first: two servers would each send every notification",
            )
        })?;
    // Under the server lock, what writers that died (a crash, a kill) left half-written goes
    // before anything else runs, so `mess fsck` is clean after a restart.
    crate::cli::heal_interrupted_writes(cx);
    // A channel without its settings would fail every delivery, and a misspelt key is silently
    // ignored: say so now (the same lines as `mess status` and `mess fsck`).
    for problem in cx.exchange.config_problems() {
        output::warn(&problem);
    }
    let addr = args
        .addr
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], cx.config.http_port.unwrap_or(8420))));
    // Bound before the exchange is made: without an address given for links, they point where
    // this server listens.
    let listener = std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| {
            CliError::with_hint(
                format!("cannot listen on {addr}: {e}"),
                "pick another port with --addr 127.0.0.1:PORT",
            )
        })?;
    let local = listener
        .local_addr()
        .map_err(|e| CliError::new(format!("cannot read the bound address: {e}")))?;
    let mut exchange = cx.exchange.clone().with_background_routing();
    if !cx.config.public_url_given {
        let url = url_of(local);
        record_url(home, &url);
        exchange = exchange.with_public_url(url);
    }
    let exchange = Arc::new(exchange);
    // Changes written by other processes (the CLI, tools) reach /events and waits too.
    let _watch = match cx.exchange.changes().watch_home() {
        Ok(w) => Some(w),
        Err(e) => {
            output::warn(&format!(
                "cannot watch the home ({e}); events show only this server's changes"
            ));
            None
        }
    };
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)
            .map_err(|e| CliError::new(format!("cannot listen on {local}: {e}")))?;
        if !local.ip().is_loopback() {
            output::warn(&format!(
                "listening on {local}, reachable from other machines: keep API keys secret"
            ));
        }
        output::line(&format!("listening on http://{local}"));
        let stop = tokio_util::sync::CancellationToken::new();
        let notifier = Notifier::new(cx.config.notify.clone())
            .map_err(|e| CliError::new(format!("cannot start notifications: {e}")))?;
        // Routing, deadlines and notices run here unless an agent host's `mess mcp` already
        // does them for this home; then this server takes over when that process exits.
        let background = background::run(
            (*exchange).clone(),
            notifier.clone(),
            stop.clone(),
            route_retry(),
        );
        if let Some(addr) = cx.config.metrics_listen {
            let metrics = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
                CliError::new(format!("cannot listen on {addr} (metrics.listen): {e}"))
            })?;
            if !addr.ip().is_loopback() {
                output::warn(&format!(
                    "metrics.listen {addr} answers /metrics to anyone who reaches it"
                ));
            }
            let app = crate::http::metrics_app(exchange.clone());
            let (stop, limits) = (stop.clone(), crate::http::serve::Limits::defaults());
            tokio::spawn(crate::http::serve::serve(metrics, app, limits, stop));
        }
        let app = crate::http::app(
            exchange,
            stop.clone(),
            &cx.config.http_cors_origins,
            crate::exchange::hooks::Hooks::new(notifier),
        );
        let signalled = stop.clone();
        tokio::spawn(async move {
            shutdown().await;
            // Streams (events, MCP) end and requests in flight finish.
            signalled.cancel();
        });
        let mut limits = crate::http::serve::Limits::defaults();
        if let Some(t) = output::env_millis("MESS_HEADER_TIMEOUT_MS") {
            limits.header_timeout = t;
        }
        if let Some(n) = std::env::var("MESS_MAX_CONNECTIONS")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|n| *n > 0)
        {
            limits.max_connections = n;
        }
        crate::http::serve::serve(listener, app, limits, stop).await;
        // A pass in flight finishes its writes before the process exits.
        let _ = background.await;
        Ok(())
    })
}

/// The address links use for a server listening on `local`: an unspecified address (0.0.0.0)
/// is reached from this machine on loopback, and anyone else needs `dispatch.public_url`.
fn url_of(local: SocketAddr) -> String {
    let mut reached = local;
    if local.ip().is_unspecified() {
        reached.set_ip(if local.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        });
        output::warn(&format!(
            "links point at http://{reached}; set dispatch.public_url (or MESS_PUBLIC_URL) to the address phones reach"
        ));
    }
    format!("http://{reached}")
}

/// Records `url` in the home for the links other commands print (`mess link`); a home that
/// cannot take it only makes them fall back to `http.port`.
fn record_url(home: &std::path::Path, url: &str) {
    let path = home.join(crate::cli::config::SERVE_URL_FILE);
    let tmp = path.with_extension("tmp");
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&tmp, format!("{url}\n")))
        .and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        output::warn(&format!(
            "cannot record the server's address in {}: {e}",
            path.display()
        ));
    }
}

/// Resolves on Ctrl-C or SIGTERM: the server finishes the requests in flight and stops.
async fn shutdown() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}
