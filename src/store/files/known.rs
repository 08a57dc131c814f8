//! What this process knows of the home's thread files without asking the disk again: which
//! files it wrote itself (so the home watch skips its own changes) and, once the home watch
//! runs, whether any thread file carries MESSE-AF's short `.messe-af` suffix (while none does,
//! a lookup tries one name per folder instead of two).
//!
//! Where a thread was last seen is deliberately not kept: another process moves a thread by
//! writing its new copy before removing the old one, so a read that looked only where the
//! thread was last seen could act on the old copy and never look again (tried; the
//! cross-process tests caught it). Every lookup still tries every folder.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::protocol::status::State;
use crate::store::layout::{Layout, THREAD_SUFFIX, THREAD_SUFFIXES};

/// Files remembered before the record starts over (a forgotten one is at worst read again).
const WRITTEN_KEPT: usize = 4096;

/// The short suffix: not known whether a file has it (every lookup tries it), none has, some has.
const SHORT_UNKNOWN: u8 = 0;
const SHORT_ABSENT: u8 = 1;
const SHORT_PRESENT: u8 = 2;

/// See the module documentation; shared by every clone of a store.
#[derive(Debug, Default)]
pub(crate) struct Known {
    written: Mutex<HashMap<PathBuf, Stamp>>,
    short_suffix: AtomicU8,
}

/// What a file looked like right after this process wrote it. Another writer's change never
/// matches: a replace makes a new inode, an append a new length and time.
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

fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl Known {
    /// Records that this process just wrote the thread file at `path`.
    pub(crate) fn wrote(&self, path: &Path) {
        let Some(stamp) = Stamp::of(path) else { return };
        let mut written = guard(&self.written);
        if written.len() >= WRITTEN_KEPT {
            written.clear();
        }
        written.insert(path.to_owned(), stamp);
    }

    /// True when the file at `path` is still the one this process last wrote there.
    pub(crate) fn is_own(&self, path: &Path) -> bool {
        let Some(want) = guard(&self.written).get(path).copied() else {
            return false;
        };
        Stamp::of(path) == Some(want)
    }

    /// The suffixes a thread file may have in this home: both until the home was looked over
    /// ([`Known::look_over_suffixes`]), then only mess's own while no file has the short one.
    pub(crate) fn suffixes(&self) -> &'static [&'static str] {
        match self.short_suffix.load(Ordering::Acquire) {
            SHORT_ABSENT => std::slice::from_ref(&THREAD_SUFFIX),
            _ => &THREAD_SUFFIXES,
        }
    }

    /// Looks over the home's folders once for files with the short suffix. From then on the
    /// caller must report every name it sees appear ([`Known::saw_name`]): the home watch does.
    pub(crate) fn look_over_suffixes(&self, layout: &Layout) {
        let mut dirs: Vec<PathBuf> = State::ALL.iter().map(|s| layout.state_dir(*s)).collect();
        if let Ok(months) = std::fs::read_dir(layout.archive_dir()) {
            dirs.extend(months.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
        }
        let short = THREAD_SUFFIXES[1];
        let present = dirs.iter().any(|dir| {
            std::fs::read_dir(dir).is_ok_and(|entries| {
                entries
                    .flatten()
                    .any(|e| e.file_name().to_string_lossy().ends_with(short))
            })
        });
        let value = if present { SHORT_PRESENT } else { SHORT_ABSENT };
        // A name reported meanwhile wins over the look.
        let _ = self.short_suffix.compare_exchange(
            SHORT_UNKNOWN,
            value,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// Reports a file name that appeared in the home.
    pub(crate) fn saw_name(&self, name: &str) {
        if name.ends_with(THREAD_SUFFIXES[1]) {
            self.short_suffix.store(SHORT_PRESENT, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Known;
    use crate::protocol::status::State;
    use crate::store::layout::{Layout, THREAD_SUFFIXES};
    use std::io::Write as _;

    #[test]
    fn a_file_is_own_until_another_writer_appends_to_it_or_replaces_it() {
        let dir = tempfile::TempDir::new().unwrap();
        let path = dir.path().join("2026-11-28-001.messe-af.yaml");
        let known = Known::default();
        std::fs::write(&path, "MESS: []\n").unwrap();
        assert!(!known.is_own(&path), "never noted");
        known.wrote(&path);
        assert!(known.is_own(&path));
        // The MESSE-AF recipe: `cat >>` onto the file in place.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"---\nMESS: []\n")
            .unwrap();
        assert!(!known.is_own(&path), "an append is another writer's change");
        known.wrote(&path);
        // A replace by rename: same length, another inode.
        let other = dir.path().join("other");
        std::fs::write(&other, std::fs::read(&path).unwrap()).unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert!(!known.is_own(&path), "a replace is another writer's change");
    }

    #[test]
    fn the_short_suffix_is_tried_until_the_home_is_looked_over_and_again_once_one_appears() {
        let dir = tempfile::TempDir::new().unwrap();
        let layout = Layout::new(dir.path());
        let known = Known::default();
        assert_eq!(known.suffixes(), &THREAD_SUFFIXES, "unknown: both");
        known.look_over_suffixes(&layout);
        assert_eq!(known.suffixes(), &THREAD_SUFFIXES[..1], "none there");
        known.saw_name("2026-11-28-002.messe-af");
        assert_eq!(known.suffixes(), &THREAD_SUFFIXES, "one appeared");

        let received = layout.state_dir(State::Received);
        std::fs::create_dir_all(&received).unwrap();
        std::fs::write(received.join("x-1.messe-af"), "").unwrap();
        let known = Known::default();
        known.look_over_suffixes(&layout);
        assert_eq!(known.suffixes(), &THREAD_SUFFIXES, "one on disk");
    }
}
