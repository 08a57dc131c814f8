//! `mess fsck` and the healing at start, as the store offers them: the files backend checks
//! (and repairs) its thread files; the postgres backend compares the node's mirror with the
//! database.

use crate::store::error::StoreError;
use crate::store::fsck::{Finding, FsckReport};
use crate::store::{Backend, Store};

impl Store {
    /// Checks every thread (all four folders and the archive); repairs when `repair` is set.
    /// `progress` sees (done, total).
    pub fn fsck(
        &self,
        repair: bool,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<FsckReport, StoreError> {
        match &self.backend {
            Backend::Files => self.files().fsck(repair, progress),
            Backend::Postgres(db) => {
                crate::store::postgres::mirror::fsck(db, self.layout(), repair, progress)
            }
        }
    }

    /// Finishes what writers that died left behind (`mess serve` and `mess mcp` do this at
    /// start, so `mess fsck` is clean after a crash and a restart): the temp files of
    /// interrupted writes and, on files, the older copy of a thread whose move to another
    /// folder was interrupted (checked under the thread's lock, as `fsck --repair` would, so a
    /// move in progress is never mistaken for one interrupted). A mirror's threads are
    /// rewritten from the database, so only its temp files are looked at. Returns what it
    /// repaired.
    pub fn heal_interrupted_writes(&self) -> Result<Vec<Finding>, StoreError> {
        let moves = matches!(self.backend, Backend::Files);
        self.files().heal_interrupted_writes(moves)
    }
}
