//! The protocol layer's error type: malformed YAML, invalid MESS, and refused actions.

use crate::yaml::YamlError;

/// Everything that can go wrong while reading, validating or applying a MESS message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProtocolError {
    /// The text is not parseable YAML (or breaks a parsing limit).
    #[error("{source}")]
    Malformed {
        /// What the YAML parser reported.
        #[from]
        source: YamlError,
    },
    /// The input is larger than the configured limit.
    #[error("message is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// Size of the input in bytes.
        size: usize,
        /// The configured limit in bytes.
        limit: usize,
    },
    /// Well-formed YAML that is not valid MESS; `path` names the offending field.
    #[error("{path}: {problem}")]
    Invalid {
        /// Where the problem is, e.g. `MESS[1].request.intent`.
        path: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A valid message whose effect the current state or the sender's role does not allow.
    #[error("{message}")]
    Refused {
        /// Whether the state (conflict) or the sender (forbidden) is the obstacle.
        kind: Refusal,
        /// One line naming the thread, the action and the obstacle.
        message: String,
    },
}

/// Why a valid action was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The thread's state does not allow it (invalid transition, lost claim race, confirm_before).
    Conflict,
    /// The sender may not do this to this thread.
    Forbidden,
}

impl ProtocolError {
    /// Builds an [`ProtocolError::Invalid`] for `path`.
    pub fn invalid(path: impl Into<String>, problem: impl Into<String>) -> Self {
        ProtocolError::Invalid {
            path: path.into(),
            problem: problem.into(),
        }
    }

    /// Builds a conflict refusal.
    pub fn conflict(message: impl Into<String>) -> Self {
        ProtocolError::Refused {
            kind: Refusal::Conflict,
            message: message.into(),
        }
    }

    /// Builds a forbidden refusal.
    pub fn forbidden(message: impl Into<String>) -> Self {
        ProtocolError::Refused {
            kind: Refusal::Forbidden,
            message: message.into(),
        }
    }
}
