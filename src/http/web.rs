//! The human executor page (`GET /respond?ref=&token=`, or the reference design's `request=` for `ref=`,
//! and `exchange=` for the exchange it talks to) and its two assets, embedded in the binary.
//! Serving them reads no thread and changes nothing: the page itself fetches the thread with
//! the link's token. The headers keep it contained: scripts and styles from this server only,
//! requests to this server (or the link's exchange), remote media only over https (the page
//! loads them when the executor taps), no framing, no referrer carrying the token, no caching.

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

const PAGE: &str = include_str!("web/respond.html");
const SCRIPT: &str = include_str!("web/respond.js");
const STYLE: &str = include_str!("web/respond.css");

/// Scripts and styles from this server only; media from this page's own data and blob URIs, or
/// over https; requests to this server (the page adds the link's exchange).
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data: blob: https:; media-src 'self' data: blob: https:; connect-src 'self'; \
    form-action 'none'; base-uri 'none'; frame-ancestors 'none'";

fn asset(kind: &'static str, body: &'static str) -> Response {
    with_policy(kind, body, HeaderValue::from_static(POLICY))
}

/// `body` as `kind` under the content security `policy`, with the headers every page and asset
/// carries: no referrer, no caching, no sniffing, no framing.
pub(crate) fn with_policy(
    kind: &'static str,
    body: impl IntoResponse,
    policy: HeaderValue,
) -> Response {
    let mut r = ([(header::CONTENT_TYPE, kind)], body).into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, policy);
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    r
}

/// The page's query: only `exchange=` matters to the server.
#[derive(Debug, Deserialize)]
pub(crate) struct PageParams {
    exchange: Option<String>,
}

/// The `scheme://host[:port]` of an http(s) exchange URL, or `None` for anything else (the
/// page refuses such a link itself; the policy then allows no other server).
fn exchange_origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']');
    if authority.is_empty() || !authority.chars().all(allowed) {
        return None;
    }
    Some(format!("{scheme}://{}", authority.to_ascii_lowercase()))
}

/// `GET /respond`: the page; with `exchange=`, its policy lets it talk to that exchange too.
pub(crate) async fn page(params: Result<Query<PageParams>, QueryRejection>) -> Response {
    let origin = params
        .ok()
        .and_then(|Query(p)| p.exchange)
        .and_then(|e| exchange_origin(&e));
    let policy = match origin {
        Some(o) => HeaderValue::from_str(
            &POLICY.replace("connect-src 'self'", &format!("connect-src 'self' {o}")),
        )
        // The origin holds only letters, digits and `.-:[]/`, which a header value takes.
        .unwrap_or(HeaderValue::from_static(POLICY)),
        None => HeaderValue::from_static(POLICY),
    };
    with_policy("text/html; charset=utf-8", PAGE, policy)
}

/// `GET /respond/app.js`.
pub(crate) async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// `GET /respond/app.css`.
pub(crate) async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

/// `GET /r/{code}`: the short link of a text message, sent on to the page with the token the
/// code stands for (an unknown or expired code answers 404).
pub(crate) async fn short(
    State(state): State<crate::http::AppState>,
    code: Result<Path<String>, PathRejection>,
) -> Result<Response, crate::http::error::ApiError> {
    let Path(code) = code.map_err(|e| crate::http::error::ApiError::malformed(e.body_text()))?;
    let ex = state.exchange.clone();
    let (thread, token) = state
        .blocking(move || ex.auth().follow_short_link(&code))
        .await??;
    let to = format!("/respond?ref={thread}&token={token}");
    let mut r = axum::http::StatusCode::SEE_OTHER.into_response();
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&to) {
        h.insert(header::LOCATION, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::exchange_origin;

    #[test]
    fn only_http_and_https_exchanges_reach_the_policy() {
        assert_eq!(
            exchange_origin("https://Mess.Example.com:8443/base/?x=1").as_deref(),
            Some("https://mess.example.com:8443")
        );
        assert_eq!(
            exchange_origin("http://127.0.0.1:9/").as_deref(),
            Some("http://127.0.0.1:9")
        );
        for bad in [
            "javascript:alert(1)",
            "ftp://example.com",
            "https://",
            "https://user@example.com",
            "https://a.example; script-src *",
            "data:text/html,x",
        ] {
            assert_eq!(exchange_origin(bad), None, "{bad}");
        }
    }
}
