//! API key records and generated secrets on files, under `.mess/` with mode 0600.

use crate::protocol::{emit, value::Value};
use crate::store::files::Files;
use crate::store::keys::{KeyRecord, KeysStamp, SECRET_BYTES};
use crate::store::{error::StoreError, fsio, lock, thread::parse_yaml_file};
use std::io;

impl Files<'_> {
    /// The keys file's stamp (inode, size, mtime and ctime in nanoseconds); `None` when there
    /// is no keys file.
    pub(crate) fn keys_stamp(&self) -> Result<Option<KeysStamp>, StoreError> {
        use std::os::unix::fs::MetadataExt as _;
        let path = self.layout().keys_file();
        match std::fs::metadata(&path) {
            Ok(m) => Ok(Some((
                m.ino(),
                m.size(),
                m.mtime()
                    .saturating_mul(1_000_000_000)
                    .saturating_add(m.mtime_nsec()),
                m.ctime()
                    .saturating_mul(1_000_000_000)
                    .saturating_add(m.ctime_nsec()),
            ))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::io(&path, e)),
        }
    }

    /// Every stored key record (none when no key was ever made).
    pub(crate) fn key_records(&self) -> Result<Vec<KeyRecord>, StoreError> {
        let path = self.layout().keys_file();
        let Some(text) = fsio::read_optional(&path)? else {
            return Ok(Vec::new());
        };
        let value = parse_yaml_file(&path, &text)?;
        Ok(value
            .as_seq()
            .unwrap_or_default()
            .iter()
            .filter_map(KeyRecord::from_value)
            .collect())
    }

    /// Adds a key record, under the keys lock so concurrent `mess token` runs keep every key.
    pub(crate) fn add_key_record(&self, record: KeyRecord) -> Result<(), StoreError> {
        fsio::ensure_dir(&self.layout().locks_dir())?;
        let _lock = lock::acquire(&self.layout().locks_dir(), "keys")?;
        let mut records = self.key_records()?;
        records.push(record);
        let doc = Value::Seq(records.iter().map(KeyRecord::to_value).collect());
        fsio::write_atomic_private(&self.layout().keys_file(), emit::to_yaml(&doc).as_bytes())
    }

    /// The secret in `path`, made on first use from the kernel's randomness (hex text, mode
    /// 0600); concurrent first uses agree on one.
    pub(crate) fn generated_secret(&self, path: &std::path::Path) -> Result<Vec<u8>, StoreError> {
        if let Some(text) = fsio::read_optional(path)? {
            return Ok(text.trim().as_bytes().to_vec());
        }
        fsio::ensure_dir(&self.layout().locks_dir())?;
        let hex: String = fsio::random_bytes(SECRET_BYTES)?
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        match fsio::create_atomic_private(path, hex.as_bytes()) {
            Ok(()) => Ok(hex.into_bytes()),
            Err(StoreError::Io { source, .. }) if source.kind() == io::ErrorKind::AlreadyExists => {
                let text = fsio::read_optional(path)?.unwrap_or_default();
                Ok(text.trim().as_bytes().to_vec())
            }
            Err(e) => Err(e),
        }
    }
}
