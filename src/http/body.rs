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
pub enum Format {
    Json,
    Yaml,
}

fn is_yaml(value: &str) -> bool {
    let v = value.to_ascii_lowercase();
    v.contains("yaml") || v.contains("yml")
}

impl Format {
    /// The format a client wants: what `Accept` names, else the format it sent.
    pub fn of(headers: &HeaderMap) -> Format {
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

/// Writes `value` with `status` in `format`.
pub fn render(format: Format, status: StatusCode, value: &Value) -> Response {
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

/// Reads a text body of at most `limit` bytes.
pub async fn text(body: Body, limit: usize) -> Result<String, ApiError> {
    let bytes = axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| ApiError::too_large(limit))?;
    String::from_utf8(bytes.to_vec()).map_err(|_| ApiError::malformed("the body is not UTF-8 text"))
}
