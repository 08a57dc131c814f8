//! A failed request, with the HTTP status and error code the native exchange gives for the same
//! failure (`{"error": {"code", "message"}}`).

use mess_protocol::error::{ProtocolError, Refusal};

/// What went wrong, as the API answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The HTTP status.
    pub status: u16,
    /// The error code (`invalid`, `conflict`, ...).
    pub code: &'static str,
    /// One line for the caller.
    pub message: String,
}

impl Failure {
    /// A failure with this status, code and message.
    pub fn new(status: u16, code: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            status,
            code,
            message: message.into(),
        }
    }

    /// 404: nothing the caller may reach.
    pub fn not_found(message: impl Into<String>) -> Failure {
        Failure::new(404, "not_found", message)
    }

    /// 401: no usable credentials.
    pub fn unauthorized(message: impl Into<String>) -> Failure {
        Failure::new(401, "unauthorized", message)
    }

    /// 422: what the Worker build does not do (yet), named, so that nothing is half done.
    pub fn not_at_edge(path: &str, what: &str) -> Failure {
        Failure::new(
            422,
            "invalid",
            format!(
                "{path}: {what} is not supported by the Worker build of mess; use a native exchange (mess serve) for it"
            ),
        )
    }

    /// The failure as the API's JSON body.
    pub fn body(&self) -> String {
        serde_json::json!({"error": {"code": self.code, "message": self.message}}).to_string()
    }
}

impl From<ProtocolError> for Failure {
    fn from(e: ProtocolError) -> Failure {
        let (status, code) = match &e {
            ProtocolError::Malformed { .. } => (400, "malformed"),
            ProtocolError::TooLarge { .. } => (413, "too_large"),
            ProtocolError::Invalid { .. } => (422, "invalid"),
            ProtocolError::Refused {
                kind: Refusal::Conflict,
                ..
            } => (409, "conflict"),
            ProtocolError::Refused {
                kind: Refusal::Forbidden,
                ..
            } => (403, "forbidden"),
        };
        Failure::new(status, code, e.to_string())
    }
}
