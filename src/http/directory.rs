//! `GET /executors` and `GET /capabilities`: the executors in effect and the capability catalog
//! (joined with what executors offer), for any authenticated caller.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;

use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::body::{self, Format};
use crate::http::error::ApiError;
use crate::protocol::value::{Map, Value};

/// `GET /executors`.
pub(crate) async fn executors(
    State(state): State<AppState>,
    _caller: Caller,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let ex = state.exchange.clone();
    let list = state
        .blocking(move || {
            let dir = ex.directory();
            crate::protocol::answer::executors(&dir.executors, None)
        })
        .await?;
    let mut out = Map::new();
    out.insert("executors", list);
    Ok(body::render(
        Format::of(&headers),
        StatusCode::OK,
        &Value::Map(out),
    ))
}

/// Filter of `GET /capabilities`.
#[derive(Debug, Deserialize)]
pub(crate) struct CapabilityFilter {
    /// Only capabilities with this tag.
    tag: Option<String>,
}

/// `GET /capabilities?tag=`.
pub(crate) async fn capabilities(
    State(state): State<AppState>,
    _caller: Caller,
    headers: HeaderMap,
    filter: Result<Query<CapabilityFilter>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(filter) = filter.map_err(|e| ApiError::malformed(e.body_text()))?;
    let tags: Vec<String> = filter.tag.into_iter().collect();
    let ex = state.exchange.clone();
    let list = state
        .blocking(move || {
            let dir = ex.directory();
            crate::protocol::answer::capabilities(&dir.catalog, &dir.executors, &tags)
        })
        .await?;
    let mut out = Map::new();
    out.insert("capabilities", list);
    Ok(body::render(
        Format::of(&headers),
        StatusCode::OK,
        &Value::Map(out),
    ))
}
