//! `mess archive`: moves old finished and canceled threads to `archive/YYYY-MM/`, where every
//! lookup and query still finds them.

use crate::protocol::ids::ThreadRef;
use crate::protocol::status::State;
use crate::protocol::time::Timestamp;
use crate::store::error::StoreError;
use crate::store::layout::{self, Location};
use crate::store::{FileStore, fsio, lock};

/// What an archive run did.
#[derive(Debug, Default)]
pub struct ArchiveReport {
    /// Threads moved, with their archive month.
    pub moved: Vec<(ThreadRef, String)>,
    /// Files that could not be read or moved.
    pub errors: Vec<StoreError>,
}

impl FileStore {
    /// Moves every thread of `state=finished/` and `state=canceled/` last updated before
    /// `cutoff` into the archive. `progress` sees (done, total).
    pub fn archive(
        &self,
        cutoff: Timestamp,
        progress: &mut dyn FnMut(usize, usize),
    ) -> ArchiveReport {
        let mut report = ArchiveReport::default();
        let (threads, errors) = self.list(&[State::Finished, State::Canceled], false);
        report.errors.extend(errors);
        let total = threads.len();
        for (i, (envelope, _, _)) in threads.into_iter().enumerate() {
            progress(i, total);
            if envelope.updated >= cutoff {
                continue;
            }
            match self.move_to_archive(&envelope.thread_ref, cutoff) {
                Ok(Some(month)) => report.moved.push((envelope.thread_ref, month)),
                Ok(None) => {}
                Err(e) => report.errors.push(e),
            }
        }
        progress(total, total);
        report
    }

    /// Moves one thread to its archive month under the thread's lock, re-checking that it is
    /// still finished or canceled and older than `cutoff`.
    fn move_to_archive(
        &self,
        thread: &ThreadRef,
        cutoff: Timestamp,
    ) -> Result<Option<String>, StoreError> {
        if let Some(db) = self.database() {
            let moved = db.archive_one(thread, &cutoff)?;
            if moved.is_some() {
                self.committed();
            }
            return Ok(moved);
        }
        let layout = self.layout();
        let _guard = lock::acquire(&layout.locks_dir(), &lock::thread_lock_name(thread))?;
        let copies = self.read_copies(thread)?;
        let Some(current) = copies.first() else {
            return Ok(None);
        };
        let in_final_folder = matches!(
            current.location,
            Location::State(State::Finished | State::Canceled)
        );
        if !in_final_folder || current.envelope.updated >= cutoff {
            return Ok(None);
        }
        let month = layout::archive_month(&current.envelope);
        let target = layout.thread_path(&Location::Archive(month.clone()), thread);
        fsio::ensure_dir(target.parent().unwrap_or(layout.root()))?;
        fsio::write_atomic(&target, current.text().as_bytes())?;
        for copy in &copies {
            if copy.path != target {
                fsio::remove_durable(&copy.path)?;
            }
        }
        Ok(Some(month))
    }
}
