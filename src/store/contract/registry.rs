//! The registry (executors, routing rules, the capability catalog), as the store offers it:
//! `config.yaml` and `capabilities.yaml` are the home's files on either backend; what `config`
//! messages set is files of the home (files backend) or rows every node shares (postgres).

use std::fs;
use std::path::PathBuf;

use crate::protocol::emit;
use crate::protocol::value::Value;
use crate::protocol::yaml::{self, Limits};
use crate::store::error::StoreError;
use crate::store::fsio;
use crate::store::registry::{RegistryFiles, RegistryStamp};
use crate::store::thread::parse_yaml_file;
use crate::store::{Backend, Store};

impl Store {
    /// The stamp of the registry files as they are now (a few `stat`s, no reading).
    pub fn registry_stamp(&self) -> RegistryStamp {
        use std::os::unix::fs::MetadataExt as _;
        let layout = self.layout();
        let stamp = |path: PathBuf| {
            fs::metadata(&path)
                .ok()
                .map(|m| (path, m.len(), m.mtime(), m.mtime_nsec(), m.ino()))
        };
        let database = match &self.backend {
            Backend::Files => None,
            Backend::Postgres(db) => Some(db),
        }
        .map(|db| {
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
        if let Backend::Postgres(db) = &self.backend {
            // On the postgres backend what `config` messages set lives in the database, for
            // every node.
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
        } else {
            registrations.extend(
                self.files()
                    .registration_files()
                    .into_iter()
                    .filter_map(&mut read),
            );
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
        match &self.backend {
            Backend::Files => self.files().put_registration(file_stem, registration),
            Backend::Postgres(db) => {
                db.put_registry_doc(
                    &format!("executors/{file_stem}"),
                    &emit::to_yaml(registration),
                )?;
                self.committed();
                Ok(self
                    .layout()
                    .registrations_dir()
                    .join(format!("{file_stem}.yaml")))
            }
        }
    }

    /// Stores routing rules set by a `config` message.
    pub fn put_routing(&self, routing: &Value) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Files => self.files().put_routing(routing),
            Backend::Postgres(db) => {
                db.put_registry_doc("routing", &emit::to_yaml(routing))?;
                self.committed();
                Ok(())
            }
        }
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
