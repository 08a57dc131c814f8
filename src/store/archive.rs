//! `mess archive`: moves old finished and canceled threads to `archive/YYYY-MM/`, where every
//! lookup and query still finds them.

use crate::protocol::ids::ThreadRef;
use crate::store::error::StoreError;

/// What an archive run did.
#[derive(Debug, Default)]
pub struct ArchiveReport {
    /// Threads moved, with their archive month.
    pub moved: Vec<(ThreadRef, String)>,
    /// Files that could not be read or moved.
    pub errors: Vec<StoreError>,
}
