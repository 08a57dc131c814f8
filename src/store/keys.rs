//! API key records and the link secret, under `.mess/` with mode 0600 (in tier 1, in the
//! database, so every node knows them). Keys are stored as SHA-256 hashes only; what a key
//! means (its principal and role) is the exchange's business.

use crate::protocol::value::{Map, Value};

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
    pub(crate) fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("hash", Value::str(&self.hash));
        m.insert("principal", Value::str(&self.principal));
        m.insert("role", Value::str(&self.role));
        m.insert("created", Value::str(&self.created));
        m.insert_opt("callback", self.callback.as_deref().map(Value::str));
        Value::Map(m)
    }

    pub(crate) fn from_value(v: &Value) -> Option<KeyRecord> {
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
pub(crate) const SECRET_BYTES: usize = 32;

/// What identifies one version of the keys file: the exchange rewrites it by rename, so a new
/// version always has a new inode (and a new change time).
pub type KeysStamp = (u64, u64, i64, i64);
