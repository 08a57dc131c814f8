//! The read model's error type.

/// What can go wrong in the embedded DuckDB.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// DuckDB refused or failed a statement; `context` says which.
    #[error("{context}: {source}")]
    Duckdb {
        /// The statement or asset concerned.
        context: String,
        /// DuckDB's error.
        source: duckdb::Error,
    },
    /// A user query that the read-only rules refuse.
    #[error("{message}")]
    Refused {
        /// Why.
        message: String,
    },
    /// A user query that DuckDB could not run (syntax, unknown column, ...).
    #[error("{message}")]
    Failed {
        /// DuckDB's explanation.
        message: String,
    },
    /// A user query that ran past its time limit and was interrupted.
    #[error("query interrupted after {seconds} s (the limit)")]
    Timeout {
        /// The limit.
        seconds: u64,
    },
}

impl DbError {
    pub(crate) fn duckdb(context: impl Into<String>, source: duckdb::Error) -> DbError {
        DbError::Duckdb {
            context: context.into(),
            source,
        }
    }
}
