//! The process-wide cache of parsed files, keyed by path and checked against size and
//! modification time, so repeated queries over unchanged files parse nothing. Files stay the
//! source of truth: any change to size or mtime, a new path, or a vanished file shows at once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use crate::parse::ParsedFile;

/// Identity of a file's content as far as the cache trusts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    size: u64,
    modified: Option<SystemTime>,
}

impl Stamp {
    /// Reads the stamp of `path`; `None` when it cannot be read.
    pub(crate) fn of(path: &Path) -> Option<Stamp> {
        let meta = std::fs::metadata(path).ok()?;
        Some(Stamp {
            size: meta.len(),
            modified: meta.modified().ok(),
        })
    }
}

struct Entry {
    stamp: Stamp,
    file: Arc<ParsedFile>,
}

/// Above this many cached files the cache starts over, bounding its memory.
const MAX_ENTRIES: usize = 2_000_000;

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
    let mut guard = lock();
    if guard.len() >= MAX_ENTRIES {
        guard.clear();
    }
    guard.insert(path, Entry { stamp, file });
}

/// Drops entries in `dirs` that are not among `matched` and whose file is gone (a thread that
/// moved to another state folder leaves its old path behind).
pub(crate) fn prune(dirs: &[PathBuf], matched: &std::collections::HashSet<PathBuf>) {
    let mut guard = lock();
    let stale: Vec<PathBuf> = guard
        .keys()
        .filter(|p| !matched.contains(*p))
        .filter(|p| p.parent().is_some_and(|d| dirs.iter().any(|x| x == d)))
        .filter(|p| !p.exists())
        .cloned()
        .collect();
    for p in stale {
        guard.remove(&p);
    }
}

/// Number of cached files, for tests and benchmarks.
pub fn cached_files() -> usize {
    lock().len()
}

/// Empties the cache, for cold-read benchmarks.
pub fn clear_cache() {
    lock().clear();
}
