//! The process-wide cache of parsed files, keyed by path and checked against size and
//! modification time, so repeated queries over unchanged files parse nothing. Files stay the
//! source of truth: any change to size or mtime, a new path, or a vanished file shows at once.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use crate::parse::ParsedFile;

/// Identity of a file's content as far as the cache trusts it: size, modification and change
/// times, and the inode (every write of the exchange renames a new file into place, so its
/// writes always change the inode, whatever the clock's granularity).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    size: u64,
    modified: Option<SystemTime>,
    changed: (i64, i64),
    inode: (u64, u64),
}

/// A file changed this recently may change again within the same clock tick without its
/// stamp showing it (the "racy" case of an edit in place), so its parse is not kept.
const SETTLE: Duration = Duration::from_secs(2);

impl Stamp {
    /// Reads the stamp of `path`; `None` when it cannot be read.
    pub(crate) fn of(path: &Path) -> Option<Stamp> {
        Stamp::read(path).ok()
    }

    /// Reads the stamp of `path`.
    pub(crate) fn read(path: &Path) -> std::io::Result<Stamp> {
        let meta = std::fs::metadata(path)?;
        Ok(Stamp {
            size: meta.len(),
            modified: meta.modified().ok(),
            changed: (meta.ctime(), meta.ctime_nsec()),
            inode: (meta.dev(), meta.ino()),
        })
    }

    /// Whether the file was last modified long enough ago for its parse to be kept.
    fn settled(&self) -> bool {
        let now = SystemTime::now();
        self.modified
            .is_some_and(|t| now.duration_since(t).is_ok_and(|age| age >= SETTLE))
    }
}

struct Entry {
    stamp: Stamp,
    file: Arc<ParsedFile>,
}

/// Above this many cached files the cache starts over, bounding its memory.
const MAX_ENTRIES: usize = 2_000_000;

/// Files parsed since the process started (cache misses), for tests and benchmarks.
static PARSED: AtomicUsize = AtomicUsize::new(0);

fn cache() -> &'static Mutex<HashMap<PathBuf, Entry>> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Entry>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

fn lock() -> std::sync::MutexGuard<'static, HashMap<PathBuf, Entry>> {
    match cache().lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// The cached parse of `path` if its stamp still matches and it is complete enough.
pub(crate) fn get(path: &Path, stamp: Stamp, need_all: bool) -> Option<Arc<ParsedFile>> {
    let guard = lock();
    let entry = guard.get(path)?;
    (entry.stamp == stamp && (entry.file.complete || !need_all)).then(|| entry.file.clone())
}

/// Stores a parse.
pub(crate) fn put(path: PathBuf, stamp: Stamp, file: Arc<ParsedFile>) {
    PARSED.fetch_add(1, Ordering::Relaxed);
    let mut guard = lock();
    if !stamp.settled() {
        guard.remove(&path);
        return;
    }
    if guard.len() >= MAX_ENTRIES {
        guard.clear();
    }
    guard.insert(path, Entry { stamp, file });
}

/// Drops entries in `dirs` that are not among `matched` and whose file is gone (a thread that
/// moved to another state folder leaves its old path behind).
pub(crate) fn prune(dirs: &HashSet<&Path>, matched: &HashSet<PathBuf>) {
    let mut guard = lock();
    let stale: Vec<PathBuf> = guard
        .keys()
        .filter(|p| !matched.contains(*p))
        .filter(|p| p.parent().is_some_and(|d| dirs.contains(d)))
        .filter(|p| !p.exists())
        .cloned()
        .collect();
    for p in stale {
        guard.remove(&p);
    }
}

/// Files parsed since the process started (every cache miss), for benchmarks.
pub fn parsed_files() -> usize {
    PARSED.load(Ordering::Relaxed)
}

/// Whether the parse of `path` is cached and still matches the file.
#[cfg(test)]
pub(crate) fn holds(path: &Path) -> bool {
    Stamp::of(path).is_some_and(|s| get(path, s, true).is_some())
}

/// How many files are cached.
pub fn cached_files() -> usize {
    lock().len()
}

/// Empties the cache, for cold-read benchmarks.
pub fn clear_cache() {
    lock().clear();
}
