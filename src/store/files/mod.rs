//! The files backend (tier 0): every operation of the store on the home's own files, which are
//! the source of truth. A [`Files`] is a view of the home's layout, made by the store for each
//! call; it knows nothing of PostgreSQL (the other backend, `store::postgres`).

mod archive;
mod fsck;
mod keys;
mod ledger;
mod outbox;
mod registry;
mod short;
mod threads;

pub(crate) use threads::read_envelope_file;

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::protocol::envelope::Envelope;
use crate::store::Observer;
use crate::store::layout::Layout;

/// The files backend over one home: its layout, whom to tell of every thread written, and the
/// record of this process's own writes.
#[derive(Clone, Copy)]
pub(crate) struct Files<'a> {
    pub(crate) layout: &'a Layout,
    pub(crate) observer: Option<&'a Observer>,
    pub(crate) written: &'a Written,
}

/// The thread files this process wrote last, each with what the file looked like right after
/// (inode, length, modification time). The home watch sees every write, this process's own
/// too, and those were announced already: one stat tells it so, where finding and parsing the
/// thread again cost a tenth of the server's time per message under load. Another writer's
/// change (a replace makes a new inode, an append a new length and time) never matches.
#[derive(Debug, Default)]
pub(crate) struct Written {
    files: Mutex<HashMap<PathBuf, Stamp>>,
}

/// Files remembered before the record starts over (a forgotten one is at worst read again).
const WRITTEN_KEPT: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    inode: u64,
    len: u64,
    modified: (i64, i64),
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        let m = std::fs::metadata(path).ok()?;
        Some(Stamp {
            inode: m.ino(),
            len: m.len(),
            modified: (m.mtime(), m.mtime_nsec()),
        })
    }
}

impl Written {
    fn files(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Stamp>> {
        match self.files.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Records that this process just wrote `path`.
    pub(crate) fn note(&self, path: &Path) {
        let Some(stamp) = Stamp::of(path) else { return };
        let mut files = self.files();
        if files.len() >= WRITTEN_KEPT {
            files.clear();
        }
        files.insert(path.to_owned(), stamp);
    }

    /// True when the file at `path` is still the one this process last wrote there.
    pub(crate) fn is_own(&self, path: &Path) -> bool {
        let Some(want) = self.files().get(path).copied() else {
            return false;
        };
        Stamp::of(path) == Some(want)
    }
}

impl Files<'_> {
    /// Where things live.
    pub(crate) fn layout(&self) -> &Layout {
        self.layout
    }

    /// Tells the observer about a thread just written.
    pub(crate) fn changed(&self, envelope: &Envelope) {
        if let Some(observer) = self.observer {
            observer(envelope);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Written;
    use std::io::Write as _;

    #[test]
    fn a_file_is_own_until_another_writer_appends_to_it_or_replaces_it() {
        let dir = tempfile::TempDir::new().unwrap();
        let path = dir.path().join("2026-11-28-001.messe-af.yaml");
        let written = Written::default();
        std::fs::write(&path, "MESS: []\n").unwrap();
        assert!(!written.is_own(&path), "never noted");
        written.note(&path);
        assert!(written.is_own(&path));
        // The MESSE-AF recipe: `cat >>` onto the file in place.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"---\nMESS: []\n")
            .unwrap();
        assert!(
            !written.is_own(&path),
            "an append is another writer's change"
        );
        written.note(&path);
        // A replace by rename: same length, another inode.
        let other = dir.path().join("other");
        std::fs::write(&other, std::fs::read(&path).unwrap()).unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert!(
            !written.is_own(&path),
            "a replace is another writer's change"
        );
    }
}
