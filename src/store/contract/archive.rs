//! `mess archive`, as the store offers it on either backend.

use crate::protocol::ids::ThreadRef;
use crate::protocol::status::State;
use crate::protocol::time::Timestamp;
use crate::store::archive::ArchiveReport;
use crate::store::error::StoreError;
use crate::store::{Backend, Store};

impl Store {
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
        match &self.backend {
            Backend::Files => self.files().move_to_archive(thread, cutoff),
            Backend::Postgres(db) => {
                let moved = db.archive_one(thread, &cutoff)?;
                if moved.is_some() {
                    self.committed();
                }
                Ok(moved)
            }
        }
    }
}
