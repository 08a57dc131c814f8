//! The caller of a bearer-authenticated route: the principal of its API key, or, on the routes
//! the reference design's page calls, a presigned link's token.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::exchange::auth::Principal;
use crate::http::AppState;
use crate::http::error::ApiError;

/// The authenticated principal of a request (`Authorization: Bearer <key>`).
#[derive(Debug, Clone)]
pub(crate) struct Caller(pub Principal);

/// What a bearer token is on routes that take either: an API key's principal, or a presigned
/// link's token (a JWT: three dot-separated parts, which no API key has), checked by the route
/// against what it is asked to do.
#[derive(Debug, Clone)]
pub(crate) enum Credential {
    /// An API key's principal.
    Key(Principal),
    /// A link token, not yet checked.
    Link(String),
}

impl FromRequestParts<AppState> for Credential {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Credential, ApiError> {
        let token = bearer(parts)?;
        if token.split('.').count() == 3 {
            return Ok(Credential::Link(token));
        }
        let ex = state.exchange.clone();
        let principal = state
            .blocking(move || ex.auth().authenticate(&token))
            .await??
            .ok_or_else(|| ApiError::unauthorized("unknown API key"))?;
        Ok(Credential::Key(principal))
    }
}

/// The token of an `Authorization: Bearer <token>` header.
fn bearer(parts: &Parts) -> Result<String, ApiError> {
    let header = parts
        .headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| {
            ApiError::unauthorized(
                "an API key is required (Authorization: Bearer <key>; `mess token` makes one)",
            )
        })?;
    // RFC 7235: the scheme is case-insensitive; one or more blanks separate it.
    let key = header
        .split_once([' ', '\t'])
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, key)| key.trim())
        .filter(|k| !k.is_empty())
        .ok_or_else(|| ApiError::unauthorized("the Authorization header must be `Bearer <key>`"))?
        .to_owned();
    Ok(key)
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Caller, ApiError> {
        let key = bearer(parts)?;
        let ex = state.exchange.clone();
        let principal = state
            .blocking(move || ex.auth().authenticate(&key))
            .await??
            .ok_or_else(|| ApiError::unauthorized("unknown API key"))?;
        // The request's log lines name who made it.
        tracing::Span::current().record("principal", principal.id.as_str());
        Ok(Caller(principal))
    }
}
