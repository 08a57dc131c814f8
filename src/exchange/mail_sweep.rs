//! The mail sweeper of a server: deletes expired agent mail and old archive on a timer, so a
//! mailbox nobody lists does not keep what should be gone. Listing and reading never serve such
//! messages anyway (`mail` checks on every read); this only reclaims the files. With a database
//! it also prunes the change feed (entries older than `FEED_KEEP_DAYS`), on the one node
//! doing the background work.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::exchange::sweep::Upkeep;
use crate::exchange::{Error, Exchange};

/// How often a server sweeps the mailboxes (and once at start).
pub const EVERY: Duration = Duration::from_secs(600);

/// Runs the mail sweeper until `stop`: a sweep at start, then every [`EVERY`].
pub fn run(ex: Exchange, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let worker = ex.clone();
            match tokio::task::spawn_blocking(move || worker.upkeep().prune_mail()).await {
                Ok(Ok(0)) => {}
                Ok(Ok(n)) => tracing::info!(deleted = n, "mail sweep"),
                Ok(Err(e)) => tracing::warn!(error = %e, "mail sweep failed; retrying later"),
                Err(e) => tracing::error!(error = %e, "mail sweep panicked"),
            }
            let worker = ex.clone();
            match tokio::task::spawn_blocking(move || worker.upkeep().prune_changes()).await {
                Ok(Ok(0)) => {}
                Ok(Ok(n)) => tracing::info!(deleted = n, "change feed pruned"),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "pruning the change feed failed; retrying later")
                }
                Err(e) => tracing::error!(error = %e, "pruning the change feed panicked"),
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(EVERY) => {}
            }
        }
    })
}

impl Upkeep<'_> {
    /// Deletes every expired message and the archive older than `mail::ARCHIVE_KEEP_DAYS`;
    /// returns how many went.
    pub fn prune_mail(&self) -> Result<usize, Error> {
        Ok(self.ex.mail().prune(self.ex.now())?)
    }

    /// Deletes the change feed's entries older than `FEED_KEEP_DAYS` (tier 1; nothing on
    /// files); returns how many went.
    pub fn prune_changes(&self) -> Result<i64, Error> {
        Ok(self.ex.store().prune_changes()?)
    }
}
