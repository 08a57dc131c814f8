//! `/mcp`: the MCP tools over streamable HTTP, as the principal of the caller's API key. Each
//! principal gets its own MCP service (and so its own sessions): a session opened with one key
//! cannot be used with another. In tier 1 each session's `initialize` parameters are kept in the
//! database under its principal, so a request that lands on another node continues the session
//! there (rmcp restores it) and no sticky routing is needed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore, SessionStoreError,
};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::exchange::auth::Principal;
use crate::exchange::{Exchange, Sender};
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::error::ApiError;
use crate::mcp::MessMcp;

type Service = StreamableHttpService<MessMcp, LocalSessionManager>;

/// Open MCP sessions one principal may hold (each is a task and its buffers until it ends or
/// sits idle for five minutes); one more is refused with 429 until one closes.
pub(crate) const MAX_SESSIONS_PER_PRINCIPAL: usize = 32;

/// The MCP services of the principals that used `/mcp`, with each one's session manager (to
/// count its sessions).
pub(crate) struct McpServices {
    exchange: Arc<Exchange>,
    stop: CancellationToken,
    by_principal: Mutex<HashMap<String, Principal_>>,
    /// Most bytes of one JSON-RPC request: one message, twice its size for JSON escaping.
    body_limit: usize,
}

/// One principal's MCP service, its sessions (to count them), and a lock that lets one
/// session open at a time, so a burst of `initialize` calls cannot pass the limit.
#[derive(Clone)]
struct Principal_ {
    service: Service,
    sessions: Arc<LocalSessionManager>,
    opening: Arc<tokio::sync::Mutex<()>>,
}

impl McpServices {
    /// Services over `exchange`; their streams end when `stop` is cancelled.
    pub(crate) fn new(exchange: Arc<Exchange>, stop: CancellationToken) -> McpServices {
        let body_limit = exchange
            .settings()
            .max_message_bytes
            .saturating_mul(2)
            .saturating_add(64 * 1024);
        McpServices {
            exchange,
            stop,
            by_principal: Mutex::new(HashMap::new()),
            body_limit,
        }
    }

    fn for_principal(&self, who: &Principal) -> Principal_ {
        let mut map = match self.by_principal.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        // One id may hold an agent key and an executor key: each role gets its own service.
        map.entry(format!("{}:{}", who.role, who.id))
            .or_insert_with(|| {
                let ex = self.exchange.clone();
                let sender = Sender::principal(who, "mcp");
                let sessions = Arc::new(LocalSessionManager::default());
                // Every request carries a key, which a page that rebinds DNS to this server
                // cannot have, so the Host check that guards unauthenticated local servers
                // would only stop legitimate names.
                let mut config = StreamableHttpServerConfig::default()
                    .disable_allowed_hosts()
                    .with_max_request_body_bytes(self.body_limit)
                    .with_cancellation_token(self.stop.child_token());
                if self.exchange.mcp_sessions().shared() {
                    config.session_store = Some(Arc::new(SharedSessions {
                        exchange: self.exchange.clone(),
                        principal: format!("{}:{}", who.role, who.id),
                    }));
                }
                let service = StreamableHttpService::new(
                    move || Ok(MessMcp::new(ex.clone(), sender.clone())),
                    sessions.clone(),
                    config,
                );
                Principal_ {
                    service,
                    sessions,
                    opening: Arc::default(),
                }
            })
            .clone()
    }
}

/// Any method on `/mcp`: handed to the caller's MCP service, with its body bounded like any
/// other: a JSON-RPC call carries at most one message (twice its size for JSON escaping), and
/// holds its share of the server's body budget while it is read and handled.
pub(crate) async fn mcp(
    State(state): State<AppState>,
    Caller(caller): Caller,
    request: Request,
) -> Result<Response, ApiError> {
    let limit = state.mcp.body_limit;
    let (parts, body) = request.into_parts();
    // Only a POST carries a body; a GET is the long-lived notification stream and holds none.
    let share = if parts.method == axum::http::Method::POST {
        let holder = format!("{}:{}", caller.role, caller.id);
        Some(crate::http::body::share(&parts.headers, limit, &state.bodies, &holder).await?)
    } else {
        None
    };
    let principal = state.mcp.for_principal(&caller);
    // A request without a session id opens a session: one principal holds a bounded number,
    // and opens one at a time so that a burst cannot pass the count.
    let opens =
        parts.method == axum::http::Method::POST && !parts.headers.contains_key("mcp-session-id");
    let _opening = if opens {
        let guard = principal.opening.clone().lock_owned().await;
        if principal.sessions.sessions.read().await.len() >= MAX_SESSIONS_PER_PRINCIPAL {
            return Err(ApiError::new(
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                "busy",
                format!(
                    "{} holds {MAX_SESSIONS_PER_PRINCIPAL} open MCP sessions; close one (DELETE /mcp) or let one expire",
                    caller.id
                ),
            ));
        }
        Some(guard)
    } else {
        None
    };
    let request = Request::from_parts(parts, Body::new(http_body_util::Limited::new(body, limit)));
    // For a POST, handling is reading the body and handing the call over: a body that
    // does not arrive in time ends the request, as on the other routes.
    let response = match tokio::time::timeout(
        std::time::Duration::from_secs(30),
        principal.service.handle(request),
    )
    .await
    {
        Ok(response) => response,
        Err(_) => {
            return Err(ApiError::new(
                axum::http::StatusCode::REQUEST_TIMEOUT,
                "timeout",
                "the request did not arrive within 30 s",
            ));
        }
    };
    // The body's share of the budget is held until the answer is sent: the tool runs while
    // the answer streams, and its work stays counted.
    Ok(response.map(|body| {
        let chunks = http_body_util::BodyExt::into_data_stream(body);
        Body::from_stream(tokio_stream::StreamExt::map(chunks, move |chunk| {
            let _held = &share;
            chunk
        }))
    }))
}

/// One principal's `/mcp` sessions in the exchange's database (tier 1).
struct SharedSessions {
    exchange: Arc<Exchange>,
    /// `role:id` of the principal: a session is restored only for the principal that opened it.
    principal: String,
}

#[async_trait::async_trait]
impl SessionStore for SharedSessions {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let (ex, who, id) = (
            self.exchange.clone(),
            self.principal.clone(),
            session_id.to_owned(),
        );
        let text = tokio::task::spawn_blocking(move || ex.mcp_sessions().load(&who, &id)).await??;
        match text {
            Some(text) => Ok(Some(serde_json::from_str(&text)?)),
            None => Ok(None),
        }
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let text = serde_json::to_string(state)?;
        let (ex, who, id) = (
            self.exchange.clone(),
            self.principal.clone(),
            session_id.to_owned(),
        );
        tokio::task::spawn_blocking(move || ex.mcp_sessions().save(&who, &id, &text)).await??;
        Ok(())
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        let (ex, who, id) = (
            self.exchange.clone(),
            self.principal.clone(),
            session_id.to_owned(),
        );
        tokio::task::spawn_blocking(move || ex.mcp_sessions().forget(&who, &id)).await??;
        Ok(())
    }
}
