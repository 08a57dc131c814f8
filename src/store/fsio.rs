//! Crash-safe file writes: temp file in the target folder, fsync, atomic rename, fsync of the
//! folder. Every file the store writes goes through here.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::store::error::StoreError;

/// Marker in the names of temp files, so `fsck` can find leftovers of interrupted writes.
pub(crate) const TEMP_MARK: &str = ".tmp-";

/// Writes `bytes` to `path` atomically: readers see the old content or the new, never a mix,
/// and after return the new content survives a crash.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let tmp = write_temp(path, bytes)?;
    fs::rename(&tmp, path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        StoreError::io(path, e)
    })?;
    sync_parent(path)
}

/// Writes `bytes` to `path` atomically, failing with `AlreadyExists` if `path` exists.
pub(crate) fn create_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let tmp = write_temp(path, bytes)?;
    // A hard link never replaces an existing name, which makes creation exclusive; the temp name
    // is then dropped.
    let linked = fs::hard_link(&tmp, path);
    let _ = fs::remove_file(&tmp);
    linked.map_err(|e| StoreError::io(path, e))?;
    sync_parent(path)
}

/// Removes `path` durably; a missing file is not an error.
pub(crate) fn remove_durable(path: &Path) -> Result<(), StoreError> {
    match fs::remove_file(path) {
        Ok(()) => sync_parent(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io(path, e)),
    }
}

/// Creates `dir` and its parents, syncing each new folder's parent so the folder itself survives.
pub(crate) fn ensure_dir(dir: &Path) -> Result<(), StoreError> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        ensure_dir(parent)?;
    }
    // The home holds people's requests, contact details and keys: folders are the owner's
    // alone (0700), as files are (0600).
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => sync_parent(dir),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(StoreError::io(dir, e)),
    }
}

/// [`write_atomic`] for secrets: the file is readable by its owner only (mode 0600) from the
/// moment it exists.
pub(crate) fn write_atomic_private(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let tmp = write_temp_mode(path, bytes, 0o600)?;
    fs::rename(&tmp, path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        StoreError::io(path, e)
    })?;
    sync_parent(path)
}

/// [`create_atomic`] for secrets (mode 0600).
pub(crate) fn create_atomic_private(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let tmp = write_temp_mode(path, bytes, 0o600)?;
    let linked = fs::hard_link(&tmp, path);
    let _ = fs::remove_file(&tmp);
    linked.map_err(|e| StoreError::io(path, e))?;
    sync_parent(path)
}

/// `n` random bytes from the kernel.
pub(crate) fn random_bytes(n: usize) -> Result<Vec<u8>, StoreError> {
    let source = Path::new("/dev/urandom");
    let mut bytes = vec![0u8; n];
    File::open(source)
        .and_then(|mut f| io::Read::read_exact(&mut f, &mut bytes))
        .map_err(|e| StoreError::io(source, e))?;
    Ok(bytes)
}

/// Replaces `path` atomically (readers see the old content or the new) without waiting for
/// the disk: for copies that can be rebuilt from elsewhere, such as a database's mirror.
pub(crate) fn replace_unsynced(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let tmp = write_temp_synced(path, bytes, 0o600, false)?;
    fs::rename(&tmp, path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        StoreError::io(path, e)
    })
}

fn write_temp(path: &Path, bytes: &[u8]) -> Result<PathBuf, StoreError> {
    write_temp_mode(path, bytes, 0o600)
}

fn write_temp_mode(path: &Path, bytes: &[u8], mode: u32) -> Result<PathBuf, StoreError> {
    write_temp_synced(path, bytes, mode, true)
}

fn write_temp_synced(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    sync: bool,
) -> Result<PathBuf, StoreError> {
    // rename is atomic only within one filesystem, so the temp file sits in the target folder.
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}{TEMP_MARK}{}-{}",
        std::process::id(),
        unique()
    ));
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(|e| StoreError::io(&tmp, e))?;
    let result = file
        .write_all(bytes)
        .and_then(|()| if sync { file.sync_data() } else { Ok(()) });
    if let Err(e) = result {
        drop(file);
        let _ = fs::remove_file(&tmp);
        return Err(StoreError::io(&tmp, e));
    }
    Ok(tmp)
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or(0);
    (nanos << 20) ^ COUNTER.fetch_add(1, Ordering::Relaxed)
}

/// Flushes the folder holding `path`, so a rename or unlink in it is durable.
pub(crate) fn sync_parent(path: &Path) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    sync_dir(dir)
}

/// Flushes a folder's entries to disk.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io(dir, e))
}

/// Reads a file to a string; `None` when it does not exist.
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>, StoreError> {
    match fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| StoreError::NotUtf8 {
                path: path.to_owned(),
            }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io(path, e)),
    }
}
