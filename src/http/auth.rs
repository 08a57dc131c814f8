//! The caller of a bearer-authenticated route: the principal of its API key.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::exchange::auth::Principal;
use crate::http::AppState;
use crate::http::error::ApiError;

/// The authenticated principal of a request (`Authorization: Bearer <key>`).
#[derive(Debug, Clone)]
pub struct Caller(pub Principal);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Caller, ApiError> {
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
            .ok_or_else(|| {
                ApiError::unauthorized("the Authorization header must be `Bearer <key>`")
            })?
            .to_owned();
        let ex = state.exchange.clone();
        let principal = state
            .blocking(move || ex.authenticate(&key))
            .await??
            .ok_or_else(|| ApiError::unauthorized("unknown API key"))?;
        Ok(Caller(principal))
    }
}
