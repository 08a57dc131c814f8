//! Executors, routing rules and the capability catalog as stored: `config.yaml` (written by
//! people), `executors/<id>.yaml` and `routing.yaml` (written by `config` messages; in tier 1
//! rows of the database, so every node routes alike), and `capabilities.yaml`. Returned as raw
//! values; the exchange gives them meaning.

use std::fs;
use std::path::PathBuf;

use crate::protocol::emit;
use crate::protocol::value::Value;
use crate::protocol::yaml::{self, Limits};
use crate::store::FileStore;
use crate::store::error::StoreError;
use crate::store::fsio;
use crate::store::thread::parse_yaml_file;

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
pub struct RegistryStamp(Vec<(PathBuf, u64, i64, i64, u64)>);

impl FileStore {
    /// The stamp of the registry files as they are now (a few `stat`s, no reading).
    pub fn registry_stamp(&self) -> RegistryStamp {
        use std::os::unix::fs::MetadataExt as _;
        let layout = self.layout();
        let stamp = |path: PathBuf| {
            fs::metadata(&path)
                .ok()
                .map(|m| (path, m.len(), m.mtime(), m.mtime_nsec(), m.ino()))
        };
        let database = self.database().map(|db| {
            // A failed look counts as a change, so the next one reads again.
            let (count, newest) = db.registry_version_recent().unwrap_or((-1, -1));
            (
                PathBuf::from("database"),
                count.unsigned_abs(),
                newest,
                0,
                0,
            )
        });
        let mut files: Vec<_> = [
            layout.config_file(),
            layout.routing_file(),
            layout.capabilities_file(),
            layout.registrations_dir(),
        ]
        .into_iter()
        .filter_map(stamp)
        .collect();
        if let Ok(entries) = fs::read_dir(layout.registrations_dir()) {
            let mut more: Vec<_> = entries.flatten().filter_map(|e| stamp(e.path())).collect();
            more.sort();
            files.extend(more);
        }
        files.extend(database);
        RegistryStamp(files)
    }

    /// Reads every registry file; a file that does not parse is returned as an error beside the
    /// rest.
    pub fn registry(&self) -> (RegistryFiles, Vec<StoreError>) {
        let layout = self.layout();
        let mut errors = Vec::new();
        let mut out = RegistryFiles::default();
        let mut read = |path: PathBuf| -> Option<(PathBuf, String)> {
            match fsio::read_optional(&path) {
                Ok(Some(t)) => Some((path, t)),
                Ok(None) => None,
                Err(e) => {
                    errors.push(e);
                    None
                }
            }
        };
        let config = read(layout.config_file());
        let mut routing = read(layout.routing_file());
        let capabilities = read(layout.capabilities_file());
        let mut registrations = Vec::new();
        let dir = layout.registrations_dir();
        if let Some(db) = self.database() {
            // Tier 1: what `config` messages set lives in the database, for every node.
            routing = None;
            match db.registry_docs() {
                Ok(docs) => {
                    for (name, doc) in docs {
                        match name.strip_prefix("executors/") {
                            Some(stem) => {
                                registrations.push((dir.join(format!("{stem}.yaml")), doc));
                            }
                            None if name == "routing" => {
                                routing = Some((layout.routing_file(), doc));
                            }
                            None => {}
                        }
                    }
                }
                Err(e) => errors.push(e),
            }
        } else if let Ok(entries) = fs::read_dir(&dir) {
            let mut paths: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
                .collect();
            paths.sort();
            registrations.extend(paths.into_iter().filter_map(&mut read));
        }
        let mut parse = |path: &PathBuf, text: &str| match parse_yaml_file(path, text) {
            Ok(v) => Some(v),
            Err(e) => {
                errors.push(e);
                None
            }
        };
        out.config = config.and_then(|(p, t)| parse(&p, &t));
        out.routing = routing.and_then(|(p, t)| parse(&p, &t));
        for (p, t) in registrations {
            if let Some(v) = parse(&p, &t) {
                out.registrations.push((p, v));
            }
        }
        if let Some((p, t)) = capabilities {
            match yaml::parse_documents(&t, &Limits::DEFAULT) {
                Ok(docs) => out.capabilities = docs.into_iter().filter(|d| !d.is_null()).collect(),
                Err(e) => errors.push(StoreError::malformed(&p, e.into())),
            }
        }
        (out, errors)
    }

    /// Stores an executor registration (replacing an earlier one with the same id).
    pub fn put_registration(
        &self,
        file_stem: &str,
        registration: &Value,
    ) -> Result<PathBuf, StoreError> {
        let dir = self.layout().registrations_dir();
        let path = dir.join(format!("{file_stem}.yaml"));
        if let Some(db) = self.database() {
            db.put_registry_doc(
                &format!("executors/{file_stem}"),
                &emit::to_yaml(registration),
            )?;
            self.committed();
            return Ok(path);
        }
        fsio::ensure_dir(&dir)?;
        fsio::write_atomic(&path, emit::to_yaml(registration).as_bytes())?;
        Ok(path)
    }

    /// Stores routing rules set by a `config` message.
    pub fn put_routing(&self, routing: &Value) -> Result<(), StoreError> {
        if let Some(db) = self.database() {
            db.put_registry_doc("routing", &emit::to_yaml(routing))?;
            self.committed();
            return Ok(());
        }
        fsio::ensure_dir(self.layout().root())?;
        fsio::write_atomic(
            &self.layout().routing_file(),
            emit::to_yaml(routing).as_bytes(),
        )
    }

    /// Writes `config.yaml` unless it exists; returns whether it wrote.
    pub fn init_config(&self, text: &str) -> Result<bool, StoreError> {
        let path = self.layout().config_file();
        if path.exists() {
            return Ok(false);
        }
        fsio::ensure_dir(self.layout().root())?;
        match fsio::create_atomic(&path, text.as_bytes()) {
            Ok(()) => Ok(true),
            Err(StoreError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::AlreadyExists =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }
}
