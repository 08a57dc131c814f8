//! Archiving on files: a finished thread moves to `archive/YYYY-MM/` under its lock.

use crate::protocol::{ids::ThreadRef, status::State, time::Timestamp};
use crate::store::files::Files;
use crate::store::{
    error::StoreError,
    fsio,
    layout::{self, Location},
    lock,
};

impl Files<'_> {
    /// Moves one thread to its archive month under the thread's lock, re-checking that it is
    /// still finished or canceled and older than `cutoff`.
    pub(crate) fn move_to_archive(
        &self,
        thread: &ThreadRef,
        cutoff: Timestamp,
    ) -> Result<Option<String>, StoreError> {
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
