//! Small lookup files under `.mess/`: client id and `last` per sender, suggestion ids, and the
//! reverse dependency lists. They are caches of what the thread files say; `fsck --repair`
//! rebuilds them.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::FileExt as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use crate::protocol::ids::ThreadRef;
use crate::store::error::StoreError;
use crate::store::fsio;
use crate::store::layout::Layout;
use crate::store::lock;

pub use crate::protocol::resolve::IndexKey as Key;

pub(crate) fn entry_name(key: Key<'_>) -> String {
    match key {
        Key::Last => "last".to_owned(),
        Key::LastWork => "work-last".to_owned(),
        Key::Held => "work-held".to_owned(),
        Key::WorkId(id) => format!("wid-{}", encode(id)),
        Key::ClientId(id) => format!("id-{}", encode(id)),
        Key::Suggestion(id) => format!("sug-{}", encode(id)),
    }
}

fn sender_dir(layout: &Layout, sender: &str) -> PathBuf {
    layout.index_dir().join(encode(sender))
}

/// Points `key` of `sender` at `thread`.
///
/// `last` only ever moves forward: under a lock, an entry naming a newer ref is kept, so
/// concurrent creates by one sender leave it at their newest request.
pub(crate) fn put(
    layout: &Layout,
    sender: &str,
    entries: &[(Key<'_>, &ThreadRef)],
) -> Result<(), StoreError> {
    let dir = sender_dir(layout, sender);
    fsio::ensure_dir(&dir)?;
    for (key, thread) in entries {
        let path = dir.join(entry_name(*key));
        if matches!(key, Key::Last | Key::LastWork) {
            // The entry is the sender's own, so its lock is too (striped): senders do not wait
            // for each other's flushes.
            let _guard = lock::acquire(&layout.locks_dir(), &lock::index_lock_name(sender))?;
            let current = read_entry(&path)?;
            // Already there (an offer recorded it before the claim), or newer: nothing to write.
            if current.is_some_and(|c| &c == *thread || newer(&c, thread)) {
                continue;
            }
            write_entry(&path, thread)?;
        } else {
            write_entry(&path, thread)?;
        }
    }
    Ok(())
}

/// Width of an entry written in place: the ref, its check and a newline, padded with spaces.
const ENTRY: usize = 64;

/// Points the entry at `path` to `thread`, durably. An existing entry is overwritten in place
/// with one fixed-width record and flushed (one flush, no new inode, no folder flush: about
/// three of a lifecycle's 17 flushes were these entries' folders), as the ref counter is: a
/// record this short lies in one sector, which a disk writes whole, and being as wide as any
/// record before it, it leaves no tail of a longer ref. The record carries a check of its
/// ref, because a read racing the write can see half of each (see [`read_entry`]). An
/// entry's first write, or a ref too long for a record, is a new file renamed into place.
fn write_entry(path: &Path, thread: &ThreadRef) -> Result<(), StoreError> {
    let mut record = format!("{thread} {:08x}\n", check(thread.as_str())).into_bytes();
    if record.len() > ENTRY {
        return fsio::write_atomic(path, format!("{thread}\n").as_bytes());
    }
    record.resize(ENTRY, b' ');
    let file = match OpenOptions::new().write(true).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return fsio::write_atomic(path, &record);
        }
        Err(e) => return Err(StoreError::io(path, e)),
    };
    // Only a record of this width is overwritten in place: a reader racing a write that grew
    // a shorter file could take the start of the new ref and the end of the old for a ref.
    let len = file.metadata().map_err(|e| StoreError::io(path, e))?.len();
    if len != ENTRY as u64 {
        return fsio::write_atomic(path, &record);
    }
    file.write_all_at(&record, 0)
        .and_then(|()| file.sync_data())
        .map_err(|e| StoreError::io(path, e))
}

/// The ref the entry at `path` names, if any. A file of any other width than a record was
/// renamed into place whole and is `REF`. A record may be overwritten in place, so a read that
/// overlaps the write can see the start of one record and the end of the other, which may
/// still look like a ref: a record counts only when its check matches its ref, and is read
/// again otherwise. One that never matches (a record torn by a crash, were a disk to write
/// less than a sector) names nothing: entries are caches that `mess fsck` rebuilds from the
/// thread files.
fn read_entry(path: &Path) -> Result<Option<ThreadRef>, StoreError> {
    for _ in 0..3 {
        let Some(text) = fsio::read_optional(path)? else {
            return Ok(None);
        };
        let mut words = text.split_whitespace();
        let thread = words.next().and_then(|w| ThreadRef::parse(w).ok());
        if text.len() != ENTRY {
            return Ok(thread);
        }
        let checked = words.next().and_then(|c| u32::from_str_radix(c, 16).ok());
        if let Some(thread) = thread
            && checked == Some(check(thread.as_str()))
        {
            return Ok(Some(thread));
        }
        std::thread::yield_now();
    }
    Ok(None)
}

/// FNV-1a (32 bits) of `text`: an entry's check.
fn check(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// True when `a` was allocated after `b` (refs of other shapes compare as text).
pub(crate) fn newer(a: &ThreadRef, b: &ThreadRef) -> bool {
    match (a.date_serial(), b.date_serial()) {
        (Some(x), Some(y)) => x > y,
        _ => a > b,
    }
}

/// Looks `key` up for `sender`.
pub(crate) fn get(
    layout: &Layout,
    sender: &str,
    key: Key<'_>,
) -> Result<Option<ThreadRef>, StoreError> {
    let path = sender_dir(layout, sender).join(entry_name(key));
    read_entry(&path)
}

/// Points `key` of `sender` at `thread` unconditionally; for `fsck`, which holds the sender's
/// creation lock.
pub(crate) fn put_exact(
    layout: &Layout,
    sender: &str,
    key: Key<'_>,
    thread: &ThreadRef,
) -> Result<(), StoreError> {
    let dir = sender_dir(layout, sender);
    fsio::ensure_dir(&dir)?;
    write_entry(&dir.join(entry_name(key)), thread)
}

/// Records that `dependent` waits for `dependency`.
pub(crate) fn add_dependent(
    layout: &Layout,
    dependency: &ThreadRef,
    dependent: &ThreadRef,
) -> Result<(), StoreError> {
    let dir = layout.deps_dir();
    fsio::ensure_dir(&dir)?;
    let path = dir.join(dependency.as_str());
    let existed = path.exists();
    let mut file = OpenOptions::new()
        .mode(0o600)
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| StoreError::io(&path, e))?;
    // One short write in append mode lands whole, so concurrent writers never interleave lines.
    file.write_all(format!("{dependent}\n").as_bytes())
        .and_then(|()| file.sync_data())
        .map_err(|e| StoreError::io(&path, e))?;
    if !existed {
        fsio::sync_dir(&dir)?;
    }
    Ok(())
}

/// The threads that wait for `dependency`.
pub(crate) fn dependents(
    layout: &Layout,
    dependency: &ThreadRef,
) -> Result<Vec<ThreadRef>, StoreError> {
    let path = layout.deps_dir().join(dependency.as_str());
    let mut out: Vec<ThreadRef> = Vec::new();
    for line in fsio::read_optional(&path)?.unwrap_or_default().lines() {
        if let Ok(r) = ThreadRef::parse(line.trim())
            && !out.contains(&r)
        {
            out.push(r);
        }
    }
    Ok(out)
}

/// Encodes any text as a safe file name: letters, digits, `_` and `-` stay, the rest is `%XX`;
/// long names keep a prefix and a hash so they stay under file-name limits.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.len() > 180 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for b in s.bytes() {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        let mut cut = 160;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out = format!("{}~{hash:016x}", &out[..cut]);
    }
    out
}

/// Every entry of the index folder: (sender, entry name, ref), for moving a home into a
/// database. Sender folders whose names were shortened (a hash in place of the tail) cannot be
/// read back and are left out; `mess fsck` rebuilds what they held from the thread files.
pub(crate) fn all_entries(layout: &Layout) -> Result<Vec<(String, String, ThreadRef)>, StoreError> {
    let root = layout.index_dir();
    let mut out = Vec::new();
    let senders = match std::fs::read_dir(&root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(StoreError::io(&root, e)),
    };
    for sender in senders.flatten() {
        let Some(name) = decode(&sender.file_name().to_string_lossy()) else {
            continue;
        };
        let Ok(entries) = std::fs::read_dir(sender.path()) else {
            continue;
        };
        for entry in entries.flatten() {
            let key = entry.file_name().to_string_lossy().into_owned();
            if key.contains(fsio::TEMP_MARK) || key.starts_with('.') {
                continue;
            }
            if let Some(thread) = read_entry(&entry.path())? {
                out.push((name.clone(), key, thread));
            }
        }
    }
    out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    Ok(out)
}

/// Points the entry named `key` (as [`entry_name`] names it) of `sender` at `thread`.
pub(crate) fn put_named(
    layout: &Layout,
    sender: &str,
    key: &str,
    thread: &ThreadRef,
) -> Result<(), StoreError> {
    let dir = sender_dir(layout, sender);
    fsio::ensure_dir(&dir)?;
    write_entry(&dir.join(key), thread)
}

/// The text [`encode`] made `name` from; `None` for shortened names.
fn decode(name: &str) -> Option<String> {
    if name.contains('~') {
        return None;
    }
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = name.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}
