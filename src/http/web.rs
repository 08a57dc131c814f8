//! The human executor page (`GET /respond?ref=&token=`, or the plan's `request=` for `ref=`)
//! and its two assets, embedded in the binary. Serving them reads no thread and changes
//! nothing: the page itself fetches the thread with the link's token. The headers keep it
//! self-contained: nothing from other hosts, no framing, no referrer carrying the token, no
//! caching.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

const PAGE: &str = include_str!("web/respond.html");
const SCRIPT: &str = include_str!("web/respond.js");
const STYLE: &str = include_str!("web/respond.css");

/// Scripts and styles from this server only; media from this page's own data and blob URIs;
/// requests to this server only.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data: blob:; media-src 'self' data: blob:; connect-src 'self'; \
    form-action 'none'; base-uri 'none'; frame-ancestors 'none'";

fn asset(kind: &'static str, body: &'static str) -> Response {
    let mut r = ([(header::CONTENT_TYPE, kind)], body).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
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

/// `GET /respond`: the page.
pub async fn page() -> Response {
    asset("text/html; charset=utf-8", PAGE)
}

/// `GET /respond/app.js`.
pub async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// `GET /respond/app.css`.
pub async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}
