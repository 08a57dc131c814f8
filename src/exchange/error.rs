//! The exchange's error: wraps the lower layers' errors and sorts every failure into a kind that
//! each adapter maps once (HTTP status, MCP tool error, CLI exit).

use crate::db::error::DbError;
use crate::mail::MailError;
use crate::protocol::error::{ProtocolError, Refusal};
use crate::store::error::StoreError;

/// A failed use case.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A protocol-level problem: malformed, invalid, refused, too large.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// A storage problem.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A read-model problem (SQL queries).
    #[error(transparent)]
    Db(#[from] DbError),
    /// An agent mail problem.
    #[error(transparent)]
    Mail(#[from] MailError),
    /// A reference that names no thread the sender can see.
    #[error("{message}")]
    NotFound {
        /// What was looked for and where.
        message: String,
    },
    /// No valid credentials (a missing, unknown, expired or forged key or link).
    #[error("{message}")]
    Unauthorized {
        /// Why, in words safe to show the caller.
        message: String,
    },
    /// The exchange's own settings make the operation impossible (a weak `MESS_SECRET`): the
    /// operator's to fix, so remote callers get a generic answer and the log the detail.
    #[error("{message}")]
    Misconfigured {
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A thread that may not grow by the message (it holds as much as a thread may).
    #[error("{message}")]
    ThreadFull {
        /// Which thread, how large it would grow, and the limit.
        message: String,
    },
    /// The exchange is at a limit on work at once (queries): nothing was done, the caller
    /// retries shortly.
    #[error("{message}")]
    Busy {
        /// Which limit, and that a retry will do.
        message: String,
    },
    /// Valid credentials that do not reach this thread or action.
    #[error("{message}")]
    Forbidden {
        /// Why, in words safe to show the caller.
        message: String,
    },
}

/// The kinds of failure adapters distinguish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Not parseable.
    Malformed,
    /// Parseable but not valid MESS.
    Invalid,
    /// No valid credentials.
    Unauthorized,
    /// The sender may not do this.
    Forbidden,
    /// No such thread.
    NotFound,
    /// The thread's state does not allow it.
    Conflict,
    /// Over the size limit.
    TooLarge,
    /// At a limit on work at once: retry shortly.
    Busy,
    /// The database (tier 1) cannot be reached: nothing was written; retry later.
    Unavailable,
    /// Anything else: disk errors, corrupt files.
    Internal,
}

impl Error {
    /// Sorts the error for adapters.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Protocol(p) => match p {
                ProtocolError::Malformed { .. } => ErrorKind::Malformed,
                ProtocolError::TooLarge { .. } => ErrorKind::TooLarge,
                ProtocolError::Invalid { .. } => ErrorKind::Invalid,
                ProtocolError::Refused {
                    kind: Refusal::Conflict,
                    ..
                } => ErrorKind::Conflict,
                ProtocolError::Refused {
                    kind: Refusal::Forbidden,
                    ..
                } => ErrorKind::Forbidden,
            },
            Error::Store(StoreError::NotFound { .. }) | Error::NotFound { .. } => {
                ErrorKind::NotFound
            }
            Error::Unauthorized { .. } => ErrorKind::Unauthorized,
            Error::Forbidden { .. } => ErrorKind::Forbidden,
            Error::ThreadFull { .. } => ErrorKind::TooLarge,
            Error::Misconfigured { .. } => ErrorKind::Internal,
            Error::Busy { .. } => ErrorKind::Busy,
            Error::Store(StoreError::Exists { .. }) => ErrorKind::Conflict,
            Error::Store(StoreError::Unavailable { .. }) => ErrorKind::Unavailable,
            Error::Store(_) => ErrorKind::Internal,
            Error::Db(DbError::Refused { .. }) => ErrorKind::Forbidden,
            Error::Db(
                DbError::Failed { .. }
                | DbError::Timeout { .. }
                | DbError::OutOfMemory { .. }
                | DbError::WorkerDied { .. },
            ) => ErrorKind::Invalid,
            Error::Db(DbError::Duckdb { .. } | DbError::Worker { .. }) => ErrorKind::Internal,
            Error::Mail(MailError::Invalid { .. }) => ErrorKind::Invalid,
            Error::Mail(MailError::NotFound { .. }) => ErrorKind::NotFound,
            Error::Mail(MailError::Claimed { .. }) => ErrorKind::Conflict,
            Error::Mail(MailError::Store(_)) => ErrorKind::Internal,
        }
    }

    pub(crate) fn not_found(message: impl Into<String>) -> Error {
        Error::NotFound {
            message: message.into(),
        }
    }

    /// The one answer for a thread reference that names nothing the caller may see, whether
    /// the thread does not exist or belongs to others: the same words in every route, payload
    /// and tool, so the answer cannot tell the two apart.
    pub fn no_thread(reference: &str) -> Error {
        Error::NotFound {
            message: crate::protocol::resolve::no_thread(reference),
        }
    }
}
