//! Short links for SMS (`/r/{code}`): a random code mapped to a link token in
//! `.mess/short/<code>` (mode 0600; in tier 1 a row of the database, so any node follows it),
//! kept until the token expires.

use std::path::PathBuf;

use crate::store::FileStore;
use crate::store::error::StoreError;
use crate::store::fsio;

/// Characters of a code: letters and digits, so it survives every SMS gateway.
const ALPHABET: &[u8; 62] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// Length of a code: 12 of 62 characters is about 71 bits, beyond guessing over HTTP.
pub const CODE_LEN: usize = 12;

/// Whether `code` has the form of a code (checked before it names a file).
pub fn is_code(code: &str) -> bool {
    code.len() == CODE_LEN && code.bytes().all(|b| b.is_ascii_alphanumeric())
}

impl FileStore {
    fn short_dir(&self) -> PathBuf {
        self.layout().internal_dir().join("short")
    }

    /// Stores `token`, which expires at `exp` (seconds since the epoch), under a new code.
    pub fn save_short_link(&self, token: &str, exp: i64) -> Result<String, StoreError> {
        let dir = self.short_dir();
        // Rejection sampling keeps every character equally likely.
        let mut code = String::with_capacity(CODE_LEN);
        while code.len() < CODE_LEN {
            for b in fsio::random_bytes(CODE_LEN * 2)? {
                if usize::from(b) < 248 && code.len() < CODE_LEN {
                    code.push(ALPHABET[usize::from(b) % 62] as char);
                }
            }
        }
        if let Some(db) = self.database() {
            db.save_short_link(&code, token, exp)?;
            return Ok(code);
        }
        fsio::ensure_dir(&dir)?;
        fsio::create_atomic_private(&dir.join(&code), format!("{exp}\n{token}\n").as_bytes())?;
        Ok(code)
    }

    /// The token stored under `code`; `None` for a code of another form, unknown or expired
    /// at `now`.
    pub fn short_link(&self, code: &str, now: i64) -> Result<Option<String>, StoreError> {
        if !is_code(code) {
            return Ok(None);
        }
        if let Some(db) = self.database() {
            return db.short_link(code, now);
        }
        let Some(text) = fsio::read_optional(&self.short_dir().join(code))? else {
            return Ok(None);
        };
        let (exp, token) = text.split_once('\n').unwrap_or(("0", ""));
        let live = exp.trim().parse::<i64>().is_ok_and(|e| e > now);
        Ok(live.then(|| token.trim().to_owned()))
    }

    /// Removes the codes whose tokens expired before `now`; returns how many.
    pub fn prune_short_links(&self, now: i64) -> Result<usize, StoreError> {
        if let Some(db) = self.database() {
            return db.prune_short_links(now);
        }
        let Ok(entries) = std::fs::read_dir(self.short_dir()) else {
            return Ok(0);
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !is_code(&name) {
                continue;
            }
            let path = entry.path();
            let exp = fsio::read_optional(&path)?
                .and_then(|t| t.lines().next().and_then(|l| l.trim().parse::<i64>().ok()))
                .unwrap_or(0);
            if exp <= now {
                fsio::remove_durable(&path)?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_maps_to_its_token_until_it_expires_and_is_then_pruned() {
        let dir = tempfile::TempDir::new().unwrap();
        let store = FileStore::open(dir.path());
        let code = store.save_short_link("tok.en.x", 1_000).unwrap();
        assert!(is_code(&code), "{code}");
        assert_eq!(
            store.short_link(&code, 999).unwrap().as_deref(),
            Some("tok.en.x")
        );
        assert_eq!(store.short_link(&code, 1_000).unwrap(), None);
        assert_eq!(store.short_link("../secret", 0).unwrap(), None);
        let other = store.save_short_link("t2", 5_000).unwrap();
        assert_ne!(code, other);
        assert_eq!(store.prune_short_links(2_000).unwrap(), 1);
        assert_eq!(
            store.short_link(&other, 2_000).unwrap().as_deref(),
            Some("t2")
        );
    }
}
