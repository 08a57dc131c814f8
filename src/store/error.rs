//! The store's error type.

use std::io;
use std::path::{Path, PathBuf};

use crate::protocol::error::ProtocolError;

/// What can go wrong reading or writing the exchange's files.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An operating-system error on `path`.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A file that is not UTF-8 text.
    #[error("{}: not UTF-8 text", path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
    },
    /// A thread or data file that does not parse or validate.
    #[error("{}: {source}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: ProtocolError,
    },
    /// A thread file whose last document was cut off by an interrupted write.
    #[error("{}: the last document is incomplete (an interrupted write); run `mess fsck --repair`", path.display())]
    Torn {
        /// The file.
        path: PathBuf,
    },
    /// No thread with this ref.
    #[error("no thread {thread}")]
    NotFound {
        /// The ref looked for.
        thread: String,
    },
    /// A thread with this ref already exists.
    #[error("thread {thread} already exists")]
    Exists {
        /// The ref.
        thread: String,
    },
    /// The database cannot be reached now (tier 1): nothing was written; retry later.
    #[error("{message}")]
    Unavailable {
        /// What happened.
        message: String,
    },
    /// Anything else, said in words.
    #[error("{message}")]
    Other {
        /// What went wrong.
        message: String,
    },
}

impl StoreError {
    pub(crate) fn io(path: &Path, source: io::Error) -> Self {
        StoreError::Io {
            path: path.to_owned(),
            source,
        }
    }

    pub(crate) fn malformed(path: &Path, source: ProtocolError) -> Self {
        StoreError::Malformed {
            path: path.to_owned(),
            source,
        }
    }
}
