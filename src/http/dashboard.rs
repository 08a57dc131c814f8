//! The operator dashboard: the page at `/` and its assets (embedded; serving them reads nothing),
//! `GET /dashboard/login?token=` (a login link from `mess dashboard`, traded once for a session
//! cookie), and the JSON it reads under `/dashboard/api/` for an operator: a session cookie, or
//! an operator key as bearer. The cookie is HttpOnly and SameSite=Strict, and a change made
//! with it must carry `x-mess-dashboard` (which no other site's form can send), so a page
//! elsewhere cannot act with it.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use crate::exchange::dashboard_login::SESSION_SECONDS;
use crate::http::AppState;
use crate::http::error::ApiError;

const PAGE: &str = include_str!("web/dashboard.html");
const SCRIPT: &str = include_str!("web/dashboard.js");
const STYLE: &str = include_str!("web/dashboard.css");

/// Scripts, styles and requests to this server only; no framing, no forms elsewhere.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; form-action 'none'; base-uri 'none'; \
    frame-ancestors 'none'";

/// The session cookie's name.
const COOKIE: &str = "mess_dashboard";

/// The header a cookie-authenticated change must carry.
const CHANGE_HEADER: &str = "x-mess-dashboard";

/// Login links already traded for a session, until they expire: a login works once.
#[derive(Debug, Default)]
pub(crate) struct UsedLogins {
    used: Mutex<HashMap<String, i64>>,
}

impl UsedLogins {
    /// Records `id` as used; false when it was already.
    fn first_use(&self, id: &str, expires: i64, now: i64) -> bool {
        let mut used = match self.used.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        used.retain(|_, exp| *exp > now);
        used.insert(id.to_owned(), expires).is_none()
    }
}

fn with_headers(kind: &'static str, body: impl IntoResponse) -> Response {
    crate::http::web::with_policy(kind, body, HeaderValue::from_static(POLICY))
}

/// `GET /`: the dashboard page (it signs in, or says how, itself).
pub(crate) async fn page() -> Response {
    with_headers("text/html; charset=utf-8", PAGE)
}

/// `GET /dashboard/app.js`.
pub(crate) async fn script() -> Response {
    with_headers("text/javascript; charset=utf-8", SCRIPT)
}

/// `GET /dashboard/app.css`.
pub(crate) async fn style() -> Response {
    with_headers("text/css; charset=utf-8", STYLE)
}

/// The query of a login link.
#[derive(Debug, Deserialize)]
pub(crate) struct LoginParams {
    token: Option<String>,
}

/// `GET /dashboard/login?token=`: a valid, unused login link sets the session cookie and sends
/// the browser on to `/` (so the token leaves the address bar); anything else says what to do.
pub(crate) async fn login(
    State(state): State<AppState>,
    params: Result<Query<LoginParams>, QueryRejection>,
) -> Response {
    let token = params.ok().and_then(|Query(p)| p.token).unwrap_or_default();
    let ex = state.exchange.clone();
    let opened = state
        .blocking(move || ex.auth().open_dashboard_login(&token))
        .await;
    let now = state.exchange.now().timestamp();
    let refused = |why: &str| {
        let mut r = with_headers(
            "text/plain; charset=utf-8",
            format!(
                "{why}\n\nRun `mess dashboard` where the exchange's home is, and open the link it prints.\n"
            ),
        );
        *r.status_mut() = StatusCode::UNAUTHORIZED;
        r
    };
    let login = match opened {
        Ok(Ok(login)) => login,
        Ok(Err(e)) if e.kind() == crate::exchange::error::ErrorKind::Unauthorized => {
            return refused(&e.to_string());
        }
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "a dashboard login could not be checked");
            return refused("The login could not be checked; the server's log says why.");
        }
        Err(_) => return refused("The login could not be checked."),
    };
    if !state
        .dashboard_logins
        .first_use(&login.login_id, login.login_expires, now)
    {
        return refused("This dashboard link was used already: a login link works once.");
    }
    let secure = state
        .exchange
        .settings()
        .dispatch
        .public_url
        .starts_with("https://");
    let cookie = format!(
        "{COOKIE}={}; Path=/; Max-Age={SESSION_SECONDS}; HttpOnly; SameSite=Strict{}",
        login.session,
        if secure { "; Secure" } else { "" }
    );
    let mut r = StatusCode::SEE_OTHER.into_response();
    let h = r.headers_mut();
    h.insert(header::LOCATION, HeaderValue::from_static("/"));
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        h.insert(header::SET_COOKIE, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    tracing::info!("an operator signed in to the dashboard");
    r
}

/// `POST /dashboard/logout`: forgets the session cookie in this browser.
pub(crate) async fn logout() -> Response {
    let mut r = StatusCode::NO_CONTENT.into_response();
    r.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("mess_dashboard=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict"),
    );
    r
}

/// An operator: an operator key as bearer, or the dashboard's session cookie.
#[derive(Debug, Clone)]
pub(crate) struct Operator(pub String);

impl FromRequestParts<AppState> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Operator, ApiError> {
        let bearer = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, key)| key.trim().to_owned());
        let ex = state.exchange.clone();
        let operator = if let Some(key) = bearer {
            state
                .blocking(move || ex.auth().authenticate_operator(&key))
                .await??
                .ok_or_else(|| ApiError::unauthorized("an operator key is required"))?
        } else {
            let session = session_cookie(parts).ok_or_else(|| {
                ApiError::unauthorized(
                    "sign in with the link `mess dashboard` prints, or send an operator key",
                )
            })?;
            // A cookie comes along with any request the browser makes; a change needs the
            // header only this page's script sends.
            if parts.method != Method::GET && !parts.headers.contains_key(CHANGE_HEADER) {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    format!(
                        "a change made with the dashboard's cookie needs the {CHANGE_HEADER} header"
                    ),
                ));
            }
            state
                .blocking(move || ex.auth().dashboard_session(&session))
                .await??
        };
        tracing::Span::current().record("principal", operator.as_str());
        Ok(Operator(operator))
    }
}

fn session_cookie(parts: &Parts) -> Option<String> {
    parts
        .headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
        .filter(|v| !v.is_empty())
}

/// The filters of a thread listing, a thread's ref, a shelf, a number of days.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ApiParams {
    state: Option<String>,
    q: Option<String>,
    limit: Option<usize>,
    #[serde(rename = "ref")]
    thread: Option<String>,
    shelf: Option<String>,
    days: Option<u32>,
}

/// `GET /dashboard/api/{view}`: one view of the dashboard as JSON.
pub(crate) async fn view(
    State(state): State<AppState>,
    Operator(_): Operator,
    axum::extract::Path(view): axum::extract::Path<String>,
    params: Result<Query<ApiParams>, QueryRejection>,
) -> Result<axum::Json<Value>, ApiError> {
    let Query(p) = params.map_err(|e| ApiError::malformed(e.body_text()))?;
    let ex = state.exchange.clone();
    let answer = state
        .blocking(move || {
            let d = ex.dashboard();
            match view.as_str() {
                "overview" => d.overview().map(Some),
                "threads" => d
                    .threads(
                        p.state.as_deref().unwrap_or(""),
                        p.q.as_deref().unwrap_or(""),
                        p.limit.unwrap_or(100),
                    )
                    .map(Some),
                "thread" => d.thread(p.thread.as_deref().unwrap_or("")),
                "executors" => d.executors().map(Some),
                "jobs" => d.jobs(p.shelf.as_deref().unwrap_or("queue")).map(Some),
                "shells" => d.shells().map(Some),
                "throughput" => d.throughput(p.days.unwrap_or(14)).map(Some),
                _ => Ok(None),
            }
        })
        .await??;
    answer
        .map(axum::Json)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such thread or view"))
}

/// The body of a job action.
#[derive(Debug, Deserialize)]
pub(crate) struct JobAction {
    id: String,
}

/// `POST /dashboard/api/jobs/{action}` with `{"id"}`: `retry` a failed job, `cancel` a queued one.
pub(crate) async fn job_action(
    State(state): State<AppState>,
    Operator(_): Operator,
    axum::extract::Path(action): axum::extract::Path<String>,
    body: Result<axum::Json<JobAction>, JsonRejection>,
) -> Result<axum::Json<Value>, ApiError> {
    let axum::Json(JobAction { id }) = body.map_err(|e| ApiError::malformed(e.body_text()))?;
    let ex = state.exchange.clone();
    match action.as_str() {
        "retry" => state.blocking(move || ex.outbox().retry(&id)).await??,
        "cancel" => state.blocking(move || ex.outbox().cancel(&id)).await??,
        _ => {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                "the job actions are retry and cancel",
            ));
        }
    }
    Ok(axum::Json(serde_json::json!({"ok": true})))
}

/// `GET /dashboard/api/events`: every thread change, as `/events` sends them, for the page's
/// live updates.
pub(crate) async fn events(
    State(state): State<AppState>,
    Operator(operator): Operator,
) -> Result<Response, ApiError> {
    crate::http::events::for_operator(state, &operator)
}
