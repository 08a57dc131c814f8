//! `mess mcp`: the MCP server over stdio for agent hosts (`command: mess, args: [mcp]`). Stdout
//! is the protocol channel, so logs go to stderr and nothing else is printed.

use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::ServiceExt;

use crate::cli::{CliError, Context, output};
use crate::exchange::auth::{Principal, Role};
use crate::exchange::{Sender, background};
use crate::mcp::MessMcp;
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
    let mut server = MessMcp::new(exchange.clone(), sender).with_remotes(remotes(cx));
    if let Some(every) = output::env_millis("MESS_MCP_HEARTBEAT_MS") {
        server = server.with_heartbeat(every);
    }
    // Executors answer through other processes; the file system tells this one.
    let _watch = match cx.exchange.watch_home() {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch the home; mess_wait sees only this session's changes");
            None
        }
    };
    let cors = cx.config.http_cors_origins.clone();
    let notifier = Notifier::new(cx.config.notify.clone())
        .map_err(|e| CliError::new(format!("cannot start notifications: {e}")))?;
    runtime.block_on(async move {
        let stop = tokio_util::sync::CancellationToken::new();
        // The plan's "no separate server needed": with no `mess serve` on the home, this
        // session routes requests and sends notices; with one, it stands by.
        let worker = background::run(
            (*exchange).clone(),
            notifier,
            stop.clone(),
            crate::cli::serve::dispatch_retry(),
        );
        let web = match http {
            Some(addr) => serve_http(exchange, addr, cors, stop.clone()).await,
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
        ended
    })
}

/// Serves the HTTP API and the human page on `addr` until `stop`; a port already taken (by
/// `mess serve` or another session) is reported and the MCP session goes on without it.
async fn serve_http(
    exchange: Arc<crate::exchange::Exchange>,
    addr: SocketAddr,
    cors_origins: Vec<String>,
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
    let app = crate::http::app(exchange, stop.clone(), &cors_origins);
    Some(tokio::spawn(crate::http::serve::serve(
        listener,
        app,
        crate::http::serve::Limits::defaults(),
        stop,
    )))
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
