//! Ref allocation: `YYYY-MM-DD-NNN`, a per-day serial kept in a counter file under a
//! cross-process lock, so a ref is never handed out twice and nothing scans all threads.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::os::unix::fs::OpenOptionsExt as _;

use chrono::NaiveDate;

use crate::protocol::ids::ThreadRef;
use crate::protocol::status::State;
use crate::store::error::StoreError;
use crate::store::fsio;
use crate::store::layout::{self, Layout, Location};
use crate::store::lock;

/// Width of the counter record; fixed so an in-place rewrite never leaves stale digits.
const RECORD: usize = 21;

/// Allocates `n` consecutive unused refs for `date`.
///
/// The counter is flushed to disk before the refs are returned, so a crash can never make a
/// later allocation hand out a ref that a created thread already has.
pub(crate) fn allocate(
    layout: &Layout,
    date: NaiveDate,
    n: usize,
) -> Result<Vec<ThreadRef>, StoreError> {
    let _guard = lock::acquire(&layout.locks_dir(), "refs.lock")?;
    let dir = layout.refs_dir();
    fsio::ensure_dir(&dir)?;
    let path = dir.join(date.format("%Y-%m-%d").to_string());
    let stored = fsio::read_optional(&path)?.and_then(|t| t.trim().parse::<u64>().ok());
    let mut last = match stored {
        Some(v) => v,
        // A new day in a home whose counters are intact starts at zero: files that other writers
        // placed are skipped by the existence check below, so nothing needs listing.
        None if has_counters(&dir)? => 0,
        // A new home, or lost internal state: start after the highest serial on disk.
        None => highest_on_disk(layout, date)?,
    };
    let mut refs = Vec::with_capacity(n);
    while refs.len() < n {
        last += 1;
        let candidate = ThreadRef::from_serial(date, last);
        // A counter restored from an old backup could lag behind the files; never reuse a ref
        // whose file exists somewhere.
        if !exists_anywhere(layout, &candidate) {
            refs.push(candidate);
        }
    }
    let existed = path.exists();
    let file = OpenOptions::new()
        .mode(0o600)
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| StoreError::io(&path, e))?;
    let record = format!("{last:0>width$}\n", width = RECORD - 1);
    file.write_all_at(record.as_bytes(), 0)
        .and_then(|()| file.sync_data())
        .map_err(|e| StoreError::io(&path, e))?;
    if !existed {
        fsio::sync_dir(&dir)?;
    }
    Ok(refs)
}

fn has_counters(dir: &std::path::Path) -> Result<bool, StoreError> {
    let entries = fs::read_dir(dir).map_err(|e| StoreError::io(dir, e))?;
    Ok(entries
        .flatten()
        .any(|e| NaiveDate::parse_from_str(&e.file_name().to_string_lossy(), "%Y-%m-%d").is_ok()))
}

fn exists_anywhere(layout: &Layout, r: &ThreadRef) -> bool {
    let month = r
        .date_serial()
        .map(|(d, _)| d.format("%Y-%m").to_string())
        .unwrap_or_default();
    State::ALL
        .iter()
        .map(|s| Location::State(*s))
        .chain(std::iter::once(Location::Archive(month)))
        .flat_map(|loc| layout.thread_paths(&loc, r))
        .any(|p| p.exists())
}

/// The highest serial of `date` among thread files in every folder and the archive month.
fn highest_on_disk(layout: &Layout, date: NaiveDate) -> Result<u64, StoreError> {
    let mut dirs: Vec<_> = State::ALL.iter().map(|s| layout.state_dir(*s)).collect();
    dirs.push(layout.archive_dir().join(date.format("%Y-%m").to_string()));
    let prefix = date.format("%Y-%m-%d-").to_string();
    let mut highest = 0;
    for dir in dirs {
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(StoreError::io(&dir, e)),
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if !name.starts_with(&prefix) {
                continue;
            }
            if let Some((d, serial)) = layout::ref_of_file(&name).and_then(|r| r.date_serial())
                && d == date
            {
                highest = highest.max(serial);
            }
        }
    }
    Ok(highest)
}

/// Raises the counter of `date` to at least `serial` (used by `fsck` after finding files).
pub(crate) fn ensure_at_least(
    layout: &Layout,
    date: NaiveDate,
    serial: u64,
) -> Result<bool, StoreError> {
    let _guard = lock::acquire(&layout.locks_dir(), "refs.lock")?;
    let dir = layout.refs_dir();
    let path = dir.join(date.format("%Y-%m-%d").to_string());
    let stored = fsio::read_optional(&path)?.and_then(|t| t.trim().parse::<u64>().ok());
    if stored.is_some_and(|s| s >= serial) {
        return Ok(false);
    }
    fsio::ensure_dir(&dir)?;
    fsio::write_atomic(
        &path,
        format!("{serial:0>width$}\n", width = RECORD - 1).as_bytes(),
    )?;
    Ok(true)
}

/// Every day's counter: (day, last serial handed out).
pub(crate) fn counters(layout: &Layout) -> Result<Vec<(NaiveDate, u64)>, StoreError> {
    let dir = layout.refs_dir();
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io(&dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let Ok(date) = NaiveDate::parse_from_str(&entry.file_name().to_string_lossy(), "%Y-%m-%d")
        else {
            continue;
        };
        if let Some(last) =
            fsio::read_optional(&entry.path())?.and_then(|t| t.trim().parse::<u64>().ok())
        {
            out.push((date, last));
        }
    }
    out.sort();
    Ok(out)
}
