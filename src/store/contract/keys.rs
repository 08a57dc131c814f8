//! API key records and the generated secrets (link and webhook keys, the exchange id), as
//! the store offers them on either backend.

use crate::store::error::StoreError;
use crate::store::fsio;
use crate::store::keys::{KeyRecord, KeysStamp, SECRET_BYTES};
use crate::store::{Backend, Store};

impl Store {
    /// The keys file's stamp (inode, size, mtime and ctime in nanoseconds); `None` when there
    /// is no keys file.
    pub fn keys_stamp(&self) -> Result<Option<KeysStamp>, StoreError> {
        match &self.backend {
            Backend::Files => self.files().keys_stamp(),
            Backend::Postgres(db) => {
                let (count, newest) = db.keys_version()?;
                Ok((count > 0).then(|| (0, count.unsigned_abs(), newest, 0)))
            }
        }
    }

    /// Every stored key record (none when no key was ever made).
    pub fn key_records(&self) -> Result<Vec<KeyRecord>, StoreError> {
        match &self.backend {
            Backend::Files => self.files().key_records(),
            Backend::Postgres(db) => db.key_records(),
        }
    }

    /// Adds a key record, under the keys lock so concurrent `mess token` runs keep every key.
    pub fn add_key_record(&self, record: KeyRecord) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Files => self.files().add_key_record(record),
            Backend::Postgres(db) => db.add_key_record(&record),
        }
    }

    /// `n` random bytes from the kernel (for keys).
    pub fn random_bytes(&self, n: usize) -> Result<Vec<u8>, StoreError> {
        fsio::random_bytes(n)
    }

    /// The secret that signs presigned links: `.mess/secret`, made on first use from the
    /// kernel's randomness (hex text, mode 0600). Concurrent first uses agree on one secret.
    pub fn link_secret(&self) -> Result<Vec<u8>, StoreError> {
        self.generated_secret(&self.layout().secret_file())
    }

    /// The key that signs webhooks when `dispatch.webhook.secret` is unset:
    /// `.mess/webhook-secret`, made like [`Store::link_secret`]'s (and apart from it, so
    /// giving it to a receiver gives away no link).
    pub fn webhook_secret(&self) -> Result<Vec<u8>, StoreError> {
        self.generated_secret(&self.layout().webhook_secret_file())
    }

    /// This home's exchange id (`mess-` and 32 hex digits), made on first use like the
    /// secrets: what its links name as their audience, so that two homes sharing a link
    /// secret still refuse each other's links.
    pub fn exchange_id(&self) -> Result<String, StoreError> {
        let raw = self.generated_secret(&self.layout().exchange_id_file())?;
        let hex = String::from_utf8_lossy(&raw);
        Ok(format!("mess-{}", &hex[..hex.len().min(32)]))
    }

    /// The secret in `path`, made on first use from the kernel's randomness (hex text, mode
    /// 0600); concurrent first uses agree on one.
    fn generated_secret(&self, path: &std::path::Path) -> Result<Vec<u8>, StoreError> {
        match &self.backend {
            Backend::Files => self.files().generated_secret(path),
            Backend::Postgres(db) => {
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let fresh: String = fsio::random_bytes(SECRET_BYTES)?
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                Ok(db.secret(&name, &fresh)?.into_bytes())
            }
        }
    }
}
