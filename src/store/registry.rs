//! Executors, routing rules and the capability catalog as stored: `config.yaml` (written by
//! people), `executors/<id>.yaml` and `routing.yaml` (written by `config` messages; in tier 1
//! rows of the database, so every node routes alike), and `capabilities.yaml`. Returned as raw
//! values; the exchange gives them meaning.

use std::path::PathBuf;

use crate::protocol::value::Value;

/// Everything the registry files hold, unparsed.
#[derive(Debug, Clone, Default)]
pub struct RegistryFiles {
    /// `config.yaml` as a whole (its `executors` and `routing` keys matter here).
    pub config: Option<Value>,
    /// Registrations from `config` messages, with their files.
    pub registrations: Vec<(PathBuf, Value)>,
    /// `routing.yaml`, when a `config` message set routing rules.
    pub routing: Option<Value>,
    /// The documents of `capabilities.yaml`, one capability each.
    pub capabilities: Vec<Value>,
}

/// What the registry files are now, to tell whether anything read from them is still current:
/// each file's name, size, modification time and inode (the store replaces files by rename, so
/// a new version has a new inode), the registrations folder's included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryStamp(pub(crate) Vec<(PathBuf, u64, i64, i64, u64)>);
