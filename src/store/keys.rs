//! API key records and the link secret, under `.mess/` with mode 0600 (in tier 1, in the
//! database, so every node knows them). Keys are stored as SHA-256 hashes only; what a key
//! means (its principal and role) is the exchange's business.

use std::io;

use crate::protocol::emit;
use crate::protocol::value::{Map, Value};
use crate::store::FileStore;
use crate::store::error::StoreError;
use crate::store::fsio;
use crate::store::lock;
use crate::store::thread::parse_yaml_file;

/// One stored API key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    /// SHA-256 of the key, lowercase hex.
    pub hash: String,
    /// The principal the key acts as.
    pub principal: String,
    /// `agent` or `executor`.
    pub role: String,
    /// When it was made (RFC 3339).
    pub created: String,
    /// Where an agent key's requests report their changes when they name no `callback` of
    /// their own.
    pub callback: Option<String>,
}

impl KeyRecord {
    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("hash", Value::str(&self.hash));
        m.insert("principal", Value::str(&self.principal));
        m.insert("role", Value::str(&self.role));
        m.insert("created", Value::str(&self.created));
        m.insert_opt("callback", self.callback.as_deref().map(Value::str));
        Value::Map(m)
    }

    fn from_value(v: &Value) -> Option<KeyRecord> {
        let m = v.as_map()?;
        let field = |k: &str| m.get(k).and_then(Value::scalar_text);
        Some(KeyRecord {
            hash: field("hash")?,
            principal: field("principal")?,
            role: field("role")?,
            created: field("created").unwrap_or_default(),
            callback: field("callback").filter(|c| !c.is_empty()),
        })
    }
}

/// Bytes of a generated link secret.
const SECRET_BYTES: usize = 32;

/// What identifies one version of the keys file: the exchange rewrites it by rename, so a new
/// version always has a new inode (and a new change time).
pub type KeysStamp = (u64, u64, i64, i64);

impl FileStore {
    /// The keys file's stamp (inode, size, mtime and ctime in nanoseconds); `None` when there
    /// is no keys file.
    pub fn keys_stamp(&self) -> Result<Option<KeysStamp>, StoreError> {
        use std::os::unix::fs::MetadataExt as _;
        if let Some(db) = self.database() {
            let (count, newest) = db.keys_version()?;
            return Ok((count > 0).then(|| (0, count.unsigned_abs(), newest, 0)));
        }
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
    pub fn key_records(&self) -> Result<Vec<KeyRecord>, StoreError> {
        if let Some(db) = self.database() {
            return db.key_records();
        }
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
    pub fn add_key_record(&self, record: KeyRecord) -> Result<(), StoreError> {
        if let Some(db) = self.database() {
            return db.add_key_record(&record);
        }
        fsio::ensure_dir(&self.layout().locks_dir())?;
        let _lock = lock::acquire(&self.layout().locks_dir(), "keys")?;
        let mut records = self.key_records()?;
        records.push(record);
        let doc = Value::Seq(records.iter().map(KeyRecord::to_value).collect());
        fsio::write_atomic_private(&self.layout().keys_file(), emit::to_yaml(&doc).as_bytes())
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
    /// `.mess/webhook-secret`, made like [`FileStore::link_secret`]'s (and apart from it, so
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
        if let Some(db) = self.database() {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let fresh: String = fsio::random_bytes(SECRET_BYTES)?
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            return Ok(db.secret(&name, &fresh)?.into_bytes());
        }
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
