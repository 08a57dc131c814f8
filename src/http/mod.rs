//! The HTTP API of `mess serve` (docs/reference/http.md): axum routes that decode a request, call the
//! exchange on a blocking thread (every write is fsynced), and map the result; errors are mapped
//! once, in `error`. `app` builds the router so tests can serve it on `127.0.0.1:0`.

pub(crate) mod approvals;
pub(crate) mod auth;
pub(crate) mod body;
pub(crate) mod dashboard;
pub(crate) mod directory;
pub(crate) mod error;
pub(crate) mod events;
pub(crate) mod hooks;
pub(crate) mod link;
pub(crate) mod mcp;
pub(crate) mod query;
pub(crate) mod serve;
pub(crate) mod threads;
pub(crate) mod web;

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};

use crate::exchange::Exchange;
use crate::http::error::ApiError;

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    /// The exchange behind the API.
    pub exchange: Arc<Exchange>,
    /// The MCP services behind `/mcp`.
    pub mcp: Arc<mcp::McpServices>,
    /// Cancelled when the server shuts down: long-lived streams end then.
    pub stop: tokio_util::sync::CancellationToken,
    /// The server's budget for request bodies held in memory, in total and per holder.
    pub bodies: Arc<body::Bodies>,
    /// Open event streams per principal (or link), so one key cannot hold every connection.
    pub streams: Arc<events::Streams>,
    /// Dashboard login links already used (each works once).
    pub dashboard_logins: Arc<dashboard::UsedLogins>,
    /// The platforms' button presses (their checks, and the updates of their messages).
    pub hooks: Arc<crate::exchange::hooks::Hooks>,
}

impl AppState {
    /// Runs `work` (file IO, fsync, DuckDB) off the async workers.
    pub(crate) async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|e| ApiError::internal(&format!("a worker failed: {e}")))
    }
}

/// The API router over `exchange`; long-lived streams (MCP sessions) end when `stop` is
/// cancelled.
pub(crate) fn app(
    exchange: Arc<Exchange>,
    stop: tokio_util::sync::CancellationToken,
    cors_origins: &[String],
    hooks: crate::exchange::hooks::Hooks,
) -> Router {
    crate::exchange::telemetry::install();
    let state = AppState {
        mcp: Arc::new(mcp::McpServices::new(exchange.clone(), stop.clone())),
        exchange,
        stop,
        bodies: Arc::default(),
        streams: Arc::default(),
        dashboard_logins: Arc::default(),
        hooks: Arc::new(hooks),
    };
    Router::new()
        .route("/", get(dashboard::page))
        .route("/dashboard/app.js", get(dashboard::script))
        .route("/dashboard/app.css", get(dashboard::style))
        .route("/dashboard/login", get(dashboard::login))
        .route("/dashboard/logout", post(dashboard::logout))
        .route("/dashboard/api/events", get(dashboard::events))
        .route("/dashboard/api/jobs/{action}", post(dashboard::job_action))
        .route("/dashboard/api/{view}", get(dashboard::view))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/mess", post(threads::submit))
        .route("/mess/{ref}", get(threads::read))
        .route("/threads", get(threads::list))
        .route("/threads/{ref}", get(threads::one))
        .route("/approvals/{ref}", get(approvals::one))
        .route("/approvals/{ref}/use", post(approvals::use_once))
        .route("/thread/{ref}", get(link::read).post(link::post))
        .route("/thread/{ref}/events", get(events::thread_events))
        .route("/respond", get(web::page))
        .route("/respond/app.js", get(web::script))
        .route("/respond/app.css", get(web::style))
        .route("/r/{code}", get(web::short))
        .route("/r/{code}/{verb}", get(hooks::ask).post(hooks::act))
        .route("/hooks/slack", post(hooks::slack))
        .route("/hooks/telegram", post(hooks::telegram))
        .route("/hooks/discord", post(hooks::discord))
        .route("/events", get(events::events))
        .route("/mcp", axum::routing::any(mcp::mcp))
        .route("/query", get(query::get).post(query::post))
        .route("/executors", get(directory::executors))
        .route("/capabilities", get(directory::capabilities))
        .fallback(not_found)
        .layer(axum::middleware::from_fn(trace))
        .layer(cors(cors_origins))
        .with_state(state)
}

/// Cross-origin calls from the configured origins only (a page hosted elsewhere talking to
/// this exchange with a link token or a key); with none configured, browsers keep every other
/// origin out as usual.
fn cors(origins: &[String]) -> tower_http::cors::CorsLayer {
    use axum::http::{HeaderName, HeaderValue, Method, header};
    let allowed: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o).ok())
        .collect();
    tower_http::cors::CorsLayer::new()
        .allow_origin(tower_http::cors::AllowOrigin::list(allowed))
        .allow_methods([Method::GET, Method::POST])
        .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE, header::ACCEPT])
        .expose_headers([
            header::RETRY_AFTER,
            HeaderName::from_static("x-mess-truncated"),
        ])
        .max_age(std::time::Duration::from_secs(600))
}

/// One span per request (its id, method and path, the thread a path names, and the principal
/// once a key is checked; never the query string, which may hold a link token), one log line
/// with the status and the time taken, and the id in the answer's `x-request-id`.
async fn trace(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use tracing::Instrument;
    let id = request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            (1..=64).contains(&v.len())
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        })
        .map_or_else(new_request_id, str::to_owned);
    let path = request.uri().path();
    let thread = ["/threads/", "/mess/", "/thread/"]
        .iter()
        .find_map(|p| path.strip_prefix(p))
        .and_then(|rest| rest.split('/').next())
        .filter(|r| crate::protocol::ids::ThreadRef::parse(r).is_ok())
        .unwrap_or_default()
        .to_owned();
    let span = tracing::info_span!(
        "request",
        id = %id,
        method = %request.method(),
        path = %path,
        r#ref = tracing::field::Empty,
        principal = tracing::field::Empty,
    );
    if !thread.is_empty() {
        span.record("ref", thread.as_str());
    }
    // The route's pattern (`/threads/{ref}`), never the path itself, labels the metrics.
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or("unmatched", |m| m.as_str())
        .to_owned();
    let method = request.method().as_str().to_owned();
    let started = std::time::Instant::now();
    let mut response = next.run(request).instrument(span.clone()).await;
    crate::exchange::telemetry::http(
        &method,
        &route,
        response.status().as_u16(),
        started.elapsed(),
    );
    span.in_scope(|| {
        tracing::info!(
            status = response.status().as_u16(),
            ms = started.elapsed().as_millis() as u64,
            "served"
        );
    });
    if let Ok(value) = axum::http::HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}

/// A request id unique in this process and unlikely to meet another's: the process's start
/// second and id, and a counter.
fn new_request_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let prefix = PREFIX.get_or_init(|| {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        format!("{started:x}{:x}", std::process::id())
    });
    format!("{prefix}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// `GET /metrics`: the Prometheus text, for an operator (an operator key, or the dashboard's
/// session).
async fn metrics(
    State(state): State<AppState>,
    _: dashboard::Operator,
) -> Result<axum::response::Response, ApiError> {
    metrics_text(state.exchange).await
}

/// The Prometheus text of `ex` (its levels read off the async workers).
pub(crate) async fn metrics_text(ex: Arc<Exchange>) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    let text = tokio::task::spawn_blocking(move || crate::exchange::telemetry::render(&ex))
        .await
        .map_err(|e| ApiError::internal(&format!("a worker failed: {e}")))?;
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response())
}

/// The router of `metrics.listen`: `GET /metrics` for whoever reaches that address (which the
/// operator chose to keep private), and nothing else.
pub(crate) fn metrics_app(exchange: Arc<Exchange>) -> Router {
    crate::exchange::telemetry::install();
    Router::new()
        .route("/metrics", get(move || metrics_text(exchange.clone())))
        .fallback(not_found)
}

/// `GET /healthz`: 200 while this node can serve (naming the version, commit and build day); in tier 1 that needs the database, so a
/// load balancer takes a node that cannot reach it out of rotation (503).
async fn healthz(State(state): State<AppState>) -> Result<axum::Json<serde_json::Value>, ApiError> {
    let ex = state.exchange.clone();
    state.blocking(move || ex.health()).await??;
    Ok(axum::Json(serde_json::json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "commit": env!("MESS_COMMIT"),
        "built": env!("MESS_BUILT"),
    })))
}

async fn not_found() -> ApiError {
    ApiError::new(
        axum::http::StatusCode::NOT_FOUND,
        "not_found",
        "no such route",
    )
}
