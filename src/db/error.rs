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
    /// A user query stopped at the memory ceiling of its worker.
    #[error(
        "query stopped: it needs more memory than the {ceiling_mib} MiB a query may use (limits.query_memory); ask for fewer or smaller values"
    )]
    OutOfMemory {
        /// The ceiling, in MiB.
        ceiling_mib: u64,
    },
    /// A query's worker ended while it ran: in all likelihood a value too large for the
    /// worker's memory ceiling (an allocation failed and the process aborted).
    #[error(
        "query stopped: its worker ended ({status}), most likely at the {ceiling_mib} MiB of memory a query may use (limits.query_memory); ask for fewer or smaller values"
    )]
    WorkerDied {
        /// How the worker ended.
        status: String,
        /// The ceiling, in MiB.
        ceiling_mib: u64,
    },
    /// A query worker could not be started or broke the protocol: the server's problem.
    #[error("query worker: {message}")]
    Worker {
        /// What went wrong.
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
