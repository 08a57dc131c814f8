//! The process-wide cache of parsed files, keyed by path and checked against size and
//! modification time, so repeated queries over unchanged files parse nothing. Files stay the
//! source of truth: any change to size or mtime, a new path, or a vanished file shows at once.
//! Files are kept packed (see `packed`) and within a budget of bytes: once it is spent, further
//! files are parsed for each query and not kept, so a home of any size is read within bounded
//! memory (a query worker sets the budget from its memory ceiling).

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use crate::packed::Packed;

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
    pub(crate) fn settled(&self) -> bool {
        let now = SystemTime::now();
        self.modified
            .is_some_and(|t| now.duration_since(t).is_ok_and(|age| age >= SETTLE))
    }
}

struct Entry {
    stamp: Stamp,
    file: Arc<Packed>,
}

/// The budget when the embedding sets none: enough for the envelopes of about 400,000
/// threads (about 600 bytes each, with the entry's bookkeeping).
const DEFAULT_BUDGET: usize = 256 * 1024 * 1024;

static BUDGET: AtomicUsize = AtomicUsize::new(DEFAULT_BUDGET);

/// Bytes the cache may hold (packed files and their bookkeeping).
pub fn set_cache_budget(bytes: usize) {
    BUDGET.store(bytes, Ordering::Relaxed);
}

/// The cache's budget in bytes.
pub fn cache_budget() -> usize {
    BUDGET.load(Ordering::Relaxed)
}

#[cfg(test)]
thread_local! {
    /// A budget for scans bound on this thread only, so tests of the budget do not change
    /// what the tests running beside them see.
    pub(crate) static TEST_BUDGET: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// The budget a scan bound now works within.
pub(crate) fn budget() -> usize {
    #[cfg(test)]
    if let Some(b) = TEST_BUDGET.with(std::cell::Cell::get) {
        return b;
    }
    cache_budget()
}

/// The entries and the bytes they hold.
#[derive(Default)]
struct Cache {
    entries: HashMap<Arc<Path>, Entry>,
    bytes: usize,
}

impl Cache {
    fn remove(&mut self, path: &Path) {
        if let Some(old) = self.entries.remove(path) {
            self.bytes -= old.file.footprint();
        }
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }
}

/// Above this many cached files the cache starts over, bounding its memory.
const MAX_ENTRIES: usize = 2_000_000;

/// Files parsed since the process started (cache misses), for tests and benchmarks.
static PARSED: AtomicUsize = AtomicUsize::new(0);

fn cache() -> &'static Mutex<Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(Cache::default()))
}

fn lock() -> std::sync::MutexGuard<'static, Cache> {
    match cache().lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// The cached parse of `path` if its stamp still matches and it is complete enough.
pub(crate) fn get(path: &Path, stamp: Stamp, need_all: bool) -> Option<Arc<Packed>> {
    let guard = lock();
    let entry = guard.entries.get(path)?;
    (entry.stamp == stamp && (entry.file.complete || !need_all)).then(|| entry.file.clone())
}

/// Stores a parse if the budget allows (a newer parse of the same path always replaces the
/// older one, or removes it); whether it was kept.
pub(crate) fn put(path: &Arc<Path>, stamp: Stamp, file: Arc<Packed>, budget: usize) -> bool {
    PARSED.fetch_add(1, Ordering::Relaxed);
    let mut guard = lock();
    if !stamp.settled() {
        guard.remove(path);
        return false;
    }
    // A whole file replaces the same file's envelope only if it fits; else the envelope stays.
    let (same, old_bytes) = guard
        .entries
        .get(path)
        .map_or((false, 0), |e| (e.stamp == stamp, e.file.footprint()));
    // First come, first kept: evicting would make two queries in a row over a home larger
    // than the budget parse everything twice, where keeping the first files warm saves that
    // share of every query.
    if guard.bytes - old_bytes + file.footprint() > budget {
        if !same {
            guard.remove(path);
        }
        return false;
    }
    guard.remove(path);
    if guard.entries.len() >= MAX_ENTRIES {
        guard.clear();
    }
    guard.bytes += file.footprint();
    guard.entries.insert(path.clone(), Entry { stamp, file });
    true
}

/// Drops entries in `dirs` that are not among `matched` and whose file is gone (a thread that
/// moved to another state folder leaves its old path behind).
pub(crate) fn prune(dirs: &HashSet<&Path>, matched: &HashSet<Arc<Path>>) {
    let mut guard = lock();
    let stale: Vec<Arc<Path>> = guard
        .entries
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
    lock().entries.len()
}

/// Bytes the cached files hold (what counts against the budget).
pub fn cached_bytes() -> usize {
    lock().bytes
}

/// Empties the cache, for cold-read benchmarks.
pub fn clear_cache() {
    lock().clear();
}
