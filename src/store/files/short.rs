//! Short links on files: `.mess/short/<code>` (mode 0600), removed once its token expires.

use std::path::PathBuf;

use crate::store::files::Files;
use crate::store::short::is_code;
use crate::store::{error::StoreError, fsio};

impl Files<'_> {
    fn short_dir(&self) -> PathBuf {
        self.layout().internal_dir().join("short")
    }

    /// Stores `token`, which expires at `exp` (seconds since the epoch), under `code`.
    pub(crate) fn save_short_link(
        &self,
        code: &str,
        token: &str,
        exp: i64,
    ) -> Result<(), StoreError> {
        let dir = self.short_dir();
        fsio::ensure_dir(&dir)?;
        fsio::create_atomic_private(&dir.join(code), format!("{exp}\n{token}\n").as_bytes())
    }

    /// The token stored under `code`; `None` for a code of another form, unknown or expired
    /// at `now`.
    pub(crate) fn short_link(&self, code: &str, now: i64) -> Result<Option<String>, StoreError> {
        if !is_code(code) {
            return Ok(None);
        }
        let Some(text) = fsio::read_optional(&self.short_dir().join(code))? else {
            return Ok(None);
        };
        let (exp, token) = text.split_once('\n').unwrap_or(("0", ""));
        let live = exp.trim().parse::<i64>().is_ok_and(|e| e > now);
        Ok(live.then(|| token.trim().to_owned()))
    }

    /// Removes the codes whose tokens expired before `now`; returns how many.
    pub(crate) fn prune_short_links(&self, now: i64) -> Result<usize, StoreError> {
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
