//! API errors: every failure leaves as `{"error": {"code": "...", "message": "..."}}` with the
//! status of docs/reference/http.md, decided here and nowhere else. Internal failures are logged
//! and answered with a generic message, so no server path or trace reaches a client.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::exchange::error::{Error, ErrorKind};

/// An error on its way to an HTTP client.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    /// An error with an explicit status and code.
    pub(crate) fn new(
        status: StatusCode,
        code: &'static str,
        message: impl Into<String>,
    ) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400: the body does not parse.
    pub(crate) fn malformed(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "malformed", message)
    }

    /// 401: no valid credentials.
    pub(crate) fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 413: the body is over the limit.
    pub(crate) fn too_large(limit: usize) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("the body is larger than the limit of {limit} bytes"),
        )
    }

    /// 503: the server is at a limit (memory for bodies); the client retries a little later
    /// (`Retry-After`).
    pub(crate) fn busy() -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            "the server is handling as many large requests as it holds at once; retry shortly",
        )
    }

    /// 500, after logging what went wrong.
    pub(crate) fn internal(what: &str) -> ApiError {
        tracing::error!(error = %what, "internal error");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the exchange could not complete the request; the server log has the details",
        )
    }

    /// The same error with its message rewritten.
    pub(crate) fn map_message(mut self, f: impl FnOnce(String) -> String) -> ApiError {
        self.message = f(self.message);
        self
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        let (status, code) = match e.kind() {
            ErrorKind::Malformed => (StatusCode::BAD_REQUEST, "malformed"),
            ErrorKind::Invalid => (StatusCode::UNPROCESSABLE_ENTITY, "invalid"),
            ErrorKind::Unauthorized => (StatusCode::UNAUTHORIZED, "unauthorized"),
            ErrorKind::Forbidden => (StatusCode::FORBIDDEN, "forbidden"),
            ErrorKind::NotFound => (StatusCode::NOT_FOUND, "not_found"),
            ErrorKind::Conflict => (StatusCode::CONFLICT, "conflict"),
            ErrorKind::TooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
            // `Retry-After` comes with every 429 (see `into_response`).
            ErrorKind::Busy => (StatusCode::TOO_MANY_REQUESTS, "busy"),
            ErrorKind::Unavailable => {
                // The driver's words can name database hosts: they go to the log only.
                tracing::warn!(error = %e, "the database is unavailable");
                return ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "the exchange's database is unavailable; nothing was written; retry shortly",
                );
            }
            ErrorKind::Internal => return ApiError::internal(&e.to_string()),
        };
        ApiError::new(status, code, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": {"code": self.code, "message": self.message}});
        let mut response = (self.status, axum::Json(body)).into_response();
        if matches!(
            self.status,
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS
        ) {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}
