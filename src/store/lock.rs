//! Cross-process locks on `flock` files under `.mess/locks/`.
//!
//! Thread locks are striped over a fixed set of files, so the lock folder stays small however
//! many threads exist. Two refs can share a stripe, so code never holds two thread locks at once.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use crate::protocol::ids::ThreadRef;
use crate::store::error::StoreError;
use crate::store::fsio;

/// Number of thread-lock stripes.
const STRIPES: u64 = 64;

/// An exclusive lock, released when dropped (closing the file releases the `flock`).
#[derive(Debug)]
pub(crate) struct Lock {
    _file: File,
}

/// Takes the exclusive lock file `name` under `locks_dir`, waiting for other holders.
pub(crate) fn acquire(locks_dir: &Path, name: &str) -> Result<Lock, StoreError> {
    fsio::ensure_dir(locks_dir)?;
    let path = locks_dir.join(name);
    let file = OpenOptions::new()
        .mode(0o600)
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| StoreError::io(&path, e))?;
    file.lock().map_err(|e| StoreError::io(&path, e))?;
    Ok(Lock { _file: file })
}

/// Takes the lock file `name` if nobody holds it; `None` when it is held.
pub(crate) fn try_acquire(locks_dir: &Path, name: &str) -> Result<Option<Lock>, StoreError> {
    fsio::ensure_dir(locks_dir)?;
    let path = locks_dir.join(name);
    let file = OpenOptions::new()
        .mode(0o600)
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| StoreError::io(&path, e))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(Lock { _file: file })),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(StoreError::io(&path, e)),
    }
}

/// The lock file name guarding `thread`.
pub(crate) fn thread_lock_name(thread: &ThreadRef) -> String {
    format!(
        "thread-{:02}.lock",
        fnv1a(thread.as_str().as_bytes()) % STRIPES
    )
}

/// The lock file name guarding request creation by `sender`.
pub(crate) fn sender_lock_name(sender: &str) -> String {
    format!("sender-{:02}.lock", fnv1a(sender.as_bytes()) % STRIPES)
}

/// The lock file name guarding `sender`'s forward-only index entries (`last`, `work-last`).
pub(crate) fn index_lock_name(sender: &str) -> String {
    format!("index-{:02}.lock", fnv1a(sender.as_bytes()) % STRIPES)
}

/// FNV-1a: stable across processes and releases, unlike std's randomly seeded hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}
