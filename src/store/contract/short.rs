//! Short links (`/r/{code}`), as the store offers them on either backend.

use crate::store::error::StoreError;
use crate::store::fsio;
use crate::store::short::{ALPHABET, CODE_LEN};
use crate::store::{Backend, Store};

impl Store {
    /// Stores `token`, which expires at `exp` (seconds since the epoch), under a new code.
    pub fn save_short_link(&self, token: &str, exp: i64) -> Result<String, StoreError> {
        // Rejection sampling keeps every character equally likely.
        let mut code = String::with_capacity(CODE_LEN);
        while code.len() < CODE_LEN {
            for b in fsio::random_bytes(CODE_LEN * 2)? {
                if usize::from(b) < 248 && code.len() < CODE_LEN {
                    code.push(ALPHABET[usize::from(b) % 62] as char);
                }
            }
        }
        match &self.backend {
            Backend::Files => self.files().save_short_link(&code, token, exp)?,
            Backend::Postgres(db) => db.save_short_link(&code, token, exp)?,
        }
        Ok(code)
    }

    /// The token stored under `code`; `None` for a code of another form, unknown or expired
    /// at `now`.
    pub fn short_link(&self, code: &str, now: i64) -> Result<Option<String>, StoreError> {
        match &self.backend {
            Backend::Files => self.files().short_link(code, now),
            Backend::Postgres(db) => db.short_link(code, now),
        }
    }

    /// Removes the codes whose tokens expired before `now`; returns how many.
    pub fn prune_short_links(&self, now: i64) -> Result<usize, StoreError> {
        match &self.backend {
            Backend::Files => self.files().prune_short_links(now),
            Backend::Postgres(db) => db.prune_short_links(now),
        }
    }
}
