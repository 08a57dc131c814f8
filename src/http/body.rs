//! Request bodies and response formats: JSON by default, YAML when the request body is YAML or
//! the client asks for it (`Accept: application/yaml`).

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::http::error::ApiError;
use crate::protocol::emit;
use crate::protocol::value::Value;

/// How a response is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Json,
    Yaml,
}

fn is_yaml(value: &str) -> bool {
    let v = value.to_ascii_lowercase();
    v.contains("yaml") || v.contains("yml")
}

impl Format {
    /// The format a client wants: what `Accept` names, else the format it sent.
    pub(crate) fn of(headers: &HeaderMap) -> Format {
        let text = |name| {
            headers
                .get(name)
                .and_then(|v: &HeaderValue| v.to_str().ok())
        };
        match text(header::ACCEPT) {
            Some(a) if is_yaml(a) => Format::Yaml,
            Some(a) if a.contains("json") => Format::Json,
            _ if text(header::CONTENT_TYPE).is_some_and(is_yaml) => Format::Yaml,
            _ => Format::Json,
        }
    }
}

/// Whether a request body was sent as JSON (`Content-Type: application/json`, or any `+json`
/// type): such a body is read as strict JSON; anything else as YAML, of which JSON is mostly a
/// subset.
pub(crate) fn sent_as_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| {
            let v = v.trim().to_ascii_lowercase();
            v == "application/json" || v.ends_with("+json")
        })
}

/// Writes `value` with `status` in `format`.
pub(crate) fn render(format: Format, status: StatusCode, value: &Value) -> Response {
    match format {
        Format::Yaml => (
            status,
            [(header::CONTENT_TYPE, "application/yaml; charset=utf-8")],
            emit::to_yaml(value),
        )
            .into_response(),
        Format::Json => match serde_json::to_string(value) {
            Ok(text) => {
                (status, [(header::CONTENT_TYPE, "application/json")], text).into_response()
            }
            Err(e) => ApiError::internal(&format!("writing JSON: {e}")).into_response(),
        },
    }
}

/// Bytes of request bodies the server holds at once, across all requests.
pub(crate) const BODY_BUDGET: usize = 256 * 1024 * 1024;

/// The share of [`BODY_BUDGET`] one principal (or link) may hold at once, so one key cannot
/// take it all.
pub(crate) const BODY_BUDGET_PER_HOLDER: usize = BODY_BUDGET / 4;

/// How long a request waits for room in the body budget before it is told to retry.
const BODY_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a whole body may take to arrive once its headers are in.
const BODY_READ: std::time::Duration = std::time::Duration::from_secs(30);

/// The server's memory for request bodies: one permit per KiB in total, and per holder.
#[derive(Debug)]
pub(crate) struct Bodies {
    total: std::sync::Arc<tokio::sync::Semaphore>,
    holders:
        std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<tokio::sync::Semaphore>>>,
}

impl Default for Bodies {
    fn default() -> Bodies {
        Bodies {
            total: std::sync::Arc::new(tokio::sync::Semaphore::new(BODY_BUDGET / 1024)),
            holders: std::sync::Mutex::default(),
        }
    }
}

impl Bodies {
    fn holder(&self, holder: &str) -> std::sync::Arc<tokio::sync::Semaphore> {
        let mut holders = match self.holders.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        holders
            .entry(holder.to_owned())
            .or_insert_with(|| {
                std::sync::Arc::new(tokio::sync::Semaphore::new(BODY_BUDGET_PER_HOLDER / 1024))
            })
            .clone()
    }
}

/// A body's share of the budget, held until dropped.
#[derive(Debug)]
pub(crate) struct Share {
    _holder: tokio::sync::OwnedSemaphorePermit,
    _total: tokio::sync::OwnedSemaphorePermit,
}

/// Takes a body's share of the budget for `holder` (one permit per KiB of its declared length,
/// or of `limit` when it declares none), refusing at once a body declared over `limit`, and
/// telling the client to retry when no room comes free within a few seconds.
pub(crate) async fn share(
    headers: &HeaderMap,
    limit: usize,
    bodies: &Bodies,
    holder: &str,
) -> Result<Share, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::too_large(limit));
    }
    let weight = declared.map_or(limit, |n| n as usize).div_ceil(1024).max(1);
    let weight = u32::try_from(weight).unwrap_or(u32::MAX);
    let taken = tokio::time::timeout(BODY_WAIT, async {
        let own = bodies
            .holder(holder)
            .acquire_many_owned(weight)
            .await
            .ok()?;
        let total = bodies.total.clone().acquire_many_owned(weight).await.ok()?;
        Some(Share {
            _holder: own,
            _total: total,
        })
    })
    .await;
    taken.ok().flatten().ok_or_else(ApiError::busy)
}

/// A body read into memory, holding its share of the server's body budget until dropped.
#[derive(Debug)]
pub(crate) struct Text {
    /// The body.
    pub text: String,
    _share: Share,
}

/// Reads a text body of at most `limit` bytes. A body declared larger is refused before a
/// byte of it is read, and every body takes its share of `budget` (one permit per KiB) for as
/// long as it is held, so many large bodies at once wait, or are told to come back, instead of
/// exhausting memory.
pub(crate) async fn text(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    bodies: &Bodies,
    holder: &str,
) -> Result<Text, ApiError> {
    let share = share(headers, limit, bodies, holder).await?;
    let bytes = tokio::time::timeout(BODY_READ, axum::body::to_bytes(body, limit))
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "timeout",
                format!("the body did not arrive within {} s", BODY_READ.as_secs()),
            )
        })?
        .map_err(|_| ApiError::too_large(limit))?;
    let text = String::from_utf8(bytes.to_vec())
        .map_err(|_| ApiError::malformed("the body is not UTF-8 text"))?;
    Ok(Text {
        text,
        _share: share,
    })
}
