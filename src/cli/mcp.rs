//! `mess mcp`: the MCP server over stdio for agent hosts (`command: mess, args: [mcp]`). Stdout
//! is the protocol channel, so logs go to stderr and nothing else is printed.

use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::ServiceExt;

use crate::cli::{CliError, Context, output};
use crate::exchange::auth::{Principal, Role};
use crate::exchange::{Sender, background};
use crate::mcp::{Local, MessMcp};
use crate::notify::Notifier;

/// Arguments of `mess mcp` (the identity comes from --as, MESS_AGENT_ID, agent_id of
/// ~/.config/mess-mcp/config.yaml, or agent_id of the home's config.yaml).
#[derive(Debug, clap::Args)]
pub(crate) struct McpArgs {
    /// Act as the exchange's operator: change routing rules, register any executor and see
    /// the whole home through SQL (without it, the session is the agent it is started as)
    #[arg(long)]
    operator: bool,
    /// Also serve the HTTP API and the human page on this address while the session lasts
    /// [default with `http.enabled: true`: 127.0.0.1 on `http.port`, else 8420]
    #[arg(long, value_name = "HOST:PORT")]
    http: Option<SocketAddr>,
}

pub(crate) fn run(cx: &Context, args: McpArgs) -> Result<(), CliError> {
    let who = cx.identity()?;
    output::start_logging("warn");
    crate::cli::heal_interrupted_writes(cx);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::new(format!("cannot start the MCP runtime: {e}")))?;
    // An agent host hands the session to a model: it acts as the agent it is started as,
    // within that role, unless the operator says otherwise on the command line.
    let sender = if args.operator {
        Sender::new(who, "mcp")
    } else {
        Sender::principal(
            &Principal {
                id: who,
                role: Role::Agent,
                callback: None,
            },
            "mcp",
        )
    };
    if let Some(file) = &cx.mcp_file {
        for problem in &file.problems {
            tracing::warn!("{problem}");
        }
    }
    let http = args.http.or_else(|| {
        cx.config
            .http_enabled
            .then(|| SocketAddr::from(([127, 0, 0, 1], cx.config.http_port.unwrap_or(8420))))
    });
    let exchange = Arc::new(cx.exchange.clone());
    let heartbeat = output::env_millis("MESS_MCP_HEARTBEAT_MS");
    let serving = |ex: Arc<crate::exchange::Exchange>| match heartbeat {
        Some(every) => MessMcp::new(ex, sender.clone()).with_heartbeat(every),
        None => MessMcp::new(ex, sender.clone()),
    };
    let homes = local_homes(cx, &exchange);
    let server = serving(exchange.clone())
        .with_remotes(remotes(cx))
        .with_locals(
            homes
                .iter()
                .map(|h| Local {
                    name: h.name.clone(),
                    server: serving(h.exchange.clone()),
                })
                .collect(),
        );
    // Executors answer through other processes; the file system tells this one.
    let mut watches = vec![watch(&cx.exchange, "the home")];
    for home in &homes {
        watches.push(watch(&home.exchange, &format!("exchange {}", home.name)));
    }
    let cors = cx.config.http_cors_origins.clone();
    let notifier = Notifier::new(cx.config.notify.clone())
        .map_err(|e| CliError::new(format!("cannot start notifications: {e}")))?;
    runtime.block_on(async move {
        let stop = tokio_util::sync::CancellationToken::new();
        // The reference design's "no separate server needed": with no `mess serve` on the home, this
        // session routes requests and sends notices; with one, it stands by.
        let worker = background::run(
            (*exchange).clone(),
            notifier.clone(),
            stop.clone(),
            crate::cli::serve::route_retry(),
        );
        // The same for the other homes it names.
        let others: Vec<_> = homes
            .into_iter()
            .filter_map(|h| {
                Some(background::run(
                    (*h.exchange).clone(),
                    h.notifier?,
                    stop.clone(),
                    crate::cli::serve::route_retry(),
                ))
            })
            .collect();
        let web = match http {
            Some(addr) => serve_http(exchange, addr, cors, notifier, stop.clone()).await,
            None => None,
        };
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| CliError::new(format!("MCP session failed to start: {e}")));
        let ended = match running {
            Ok(r) => r
                .waiting()
                .await
                .map(|_| ())
                .map_err(|e| CliError::new(format!("MCP session ended with an error: {e}"))),
            Err(e) => Err(e),
        };
        stop.cancel();
        if let Some(web) = web {
            let _ = web.await;
        }
        let _ = worker.await;
        for other in others {
            let _ = other.await;
        }
        drop(watches);
        ended
    })
}

/// Serves the HTTP API and the human page on `addr` until `stop`; a port already taken (by
/// `mess serve` or another session) is reported and the MCP session goes on without it.
async fn serve_http(
    exchange: Arc<crate::exchange::Exchange>,
    addr: SocketAddr,
    cors_origins: Vec<String>,
    notifier: Notifier,
    stop: tokio_util::sync::CancellationToken,
) -> Option<tokio::task::JoinHandle<()>> {
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(%addr, error = %e, "cannot serve HTTP; the MCP session goes on without it");
            return None;
        }
    };
    if let Ok(local) = listener.local_addr() {
        tracing::warn!("serving the HTTP API and the human page on http://{local}");
    }
    let app = crate::http::app(
        exchange,
        stop.clone(),
        &cors_origins,
        crate::exchange::hooks::Hooks::new(notifier),
    );
    Some(tokio::spawn(crate::http::serve::serve(
        listener,
        app,
        crate::http::serve::Limits::defaults(),
        stop,
    )))
}

/// Watches `ex`'s home, so changes other processes make reach its waits; a home that cannot be
/// watched is reported (its waits then hear only this session's changes).
fn watch(ex: &crate::exchange::Exchange, what: &str) -> Option<crate::exchange::watch::HomeWatch> {
    match ex.changes().watch_home() {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch {what}; mess_wait sees only this session's changes there");
            None
        }
    }
}

/// A home of this machine that `exchanges:` names (`type: local`).
struct LocalHome {
    name: String,
    exchange: Arc<crate::exchange::Exchange>,
    /// What routes and notifies for it while the session lasts; `None` when it is this
    /// session's own home under another name.
    notifier: Option<Notifier>,
}

/// The local entries of `exchanges:`, each opened as `mess --home PATH` opens a home. An entry
/// that cannot be used (no such folder, a bad config.yaml) is reported and left out, so the
/// tools name it as unknown; `primary` always names the session's own home.
fn local_homes(cx: &Context, own: &Arc<crate::exchange::Exchange>) -> Vec<LocalHome> {
    let same = |a: &std::path::Path, b: &std::path::Path| {
        a.canonicalize()
            .ok()
            .is_some_and(|a| b.canonicalize().ok() == Some(a))
    };
    let mut out = Vec::new();
    for (name, entry) in &cx.config.exchanges {
        let crate::cli::config::ExchangeEntry::Local(path) = entry else {
            continue;
        };
        if name == "primary" {
            if !same(path, &cx.config.home) {
                tracing::warn!(
                    "exchanges.primary names {} but this session serves {}; `primary` is the session's home",
                    path.display(),
                    cx.config.home.display()
                );
            }
            continue;
        }
        if !path.is_dir() {
            tracing::warn!(exchange = %name, "exchanges.{name}: {} is not a folder", path.display());
            continue;
        }
        if same(path, &cx.config.home) {
            out.push(LocalHome {
                name: name.clone(),
                exchange: own.clone(),
                notifier: None,
            });
            continue;
        }
        let opened = crate::cli::config::Config::resolve_with(Some(path.clone()), None)
            .map_err(|e| e.to_string())
            .and_then(|config| {
                let notifier = Notifier::new(config.notify.clone()).map_err(|e| e.to_string())?;
                let mut settings = config.exchange.clone();
                settings.queries.worker = cx.exchange.settings().queries.worker.clone();
                let store = crate::store::Store::open(&config.home);
                let clock = Arc::new(crate::exchange::clock::SystemClock);
                Ok(LocalHome {
                    name: name.clone(),
                    exchange: Arc::new(crate::exchange::Exchange::new(store, settings, clock)),
                    notifier: Some(notifier),
                })
            });
        match opened {
            Ok(home) => out.push(home),
            Err(e) => tracing::warn!(exchange = %name, "exchanges.{name}: {e}"),
        }
    }
    out
}

/// The remote entries of `exchanges:` as clients; an entry that cannot be used (no key, a bad
/// URL) is reported and left out, so the tools name it as unknown.
fn remotes(cx: &Context) -> Vec<(String, crate::remote::Remote)> {
    let env_key = std::env::var("MESS_API_KEY")
        .ok()
        .filter(|k| !k.trim().is_empty());
    let mut out = Vec::new();
    for (name, entry) in &cx.config.exchanges {
        let crate::cli::config::ExchangeEntry::Remote { url, api_key } = entry else {
            continue;
        };
        let key = api_key
            .clone()
            .or_else(|| env_key.clone())
            .unwrap_or_default();
        match crate::remote::Remote::new(url, &key) {
            Ok(r) => out.push((name.clone(), r)),
            Err(e) => tracing::warn!(exchange = %name, "exchanges.{name}: {e}"),
        }
    }
    out
}
