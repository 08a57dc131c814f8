//! What `config` messages set, on files: `executors/<id>.yaml` and `routing.yaml` in the home,
//! each written atomically.

use std::fs;
use std::path::PathBuf;

use crate::protocol::emit;
use crate::protocol::value::Value;
use crate::store::error::StoreError;
use crate::store::files::Files;
use crate::store::fsio;

impl Files<'_> {
    /// The registration files of `executors/`, in name order.
    pub(crate) fn registration_files(&self) -> Vec<PathBuf> {
        let Ok(entries) = fs::read_dir(self.layout().registrations_dir()) else {
            return Vec::new();
        };
        let mut paths: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        paths.sort();
        paths
    }

    /// Stores an executor registration (replacing an earlier one with the same id).
    pub(crate) fn put_registration(
        &self,
        file_stem: &str,
        registration: &Value,
    ) -> Result<PathBuf, StoreError> {
        let dir = self.layout().registrations_dir();
        let path = dir.join(format!("{file_stem}.yaml"));
        fsio::ensure_dir(&dir)?;
        fsio::write_atomic(&path, emit::to_yaml(registration).as_bytes())?;
        Ok(path)
    }

    /// Stores routing rules set by a `config` message.
    pub(crate) fn put_routing(&self, routing: &Value) -> Result<(), StoreError> {
        fsio::ensure_dir(self.layout().root())?;
        fsio::write_atomic(
            &self.layout().routing_file(),
            emit::to_yaml(routing).as_bytes(),
        )
    }
}
