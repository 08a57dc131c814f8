//! The expiry sweeper of a server: expires pending, waiting and held threads when their
//! `needed_by` (or `expires`) passes, not only when someone next reads them, so waits and
//! event streams hear of the expiry on time.
//! Deadlines live in the thread files, so a restart loses none: the first sweep catches up.

use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::exchange::{Error, Exchange};
use crate::protocol::status::State;
use crate::protocol::time::Timestamp;
use crate::store::ServeLock;
use crate::store::archive::ArchiveReport;
use crate::store::fsck::{Finding, FsckReport};

/// The operator's upkeep of a home: expiry, pruning, archiving, checking and repairing, and
/// the door of an import.
#[derive(Clone, Copy)]
pub struct Upkeep<'a> {
    pub(super) ex: &'a Exchange,
}

impl Exchange {
    /// Expiry, pruning, archive, fsck and import checks.
    pub fn upkeep(&self) -> Upkeep<'_> {
        Upkeep { ex: self }
    }
}

/// How often the sweeper reads every open thread even when it keeps them in memory (and at
/// its start).
const FULL_EVERY: Duration = Duration::from_secs(600);

/// The longest the sweeper sleeps, so a deadline written by a process whose change this one
/// missed is still kept within this bound.
const MOST: Duration = Duration::from_secs(30);

/// Runs the sweeper until `stop`: a sweep at start, then at each next deadline (at most
/// `MOST` apart), and again when a change brings a pending thread with a sooner deadline.
pub fn run(ex: Exchange, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut changes = ex.changes().subscribe();
        let mut full_at: Option<tokio::time::Instant> = None;
        loop {
            let worker = ex.clone();
            let full = full_at.is_none_or(|t| t.elapsed() >= FULL_EVERY);
            if full {
                full_at = Some(tokio::time::Instant::now());
            }
            let next = match tokio::task::spawn_blocking(move || worker.upkeep().sweep_expiry(full))
                .await
            {
                Ok(Ok(next)) => next,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "expiry sweep failed; retrying later");
                    None
                }
                Err(e) => {
                    tracing::error!(error = %e, "expiry sweep panicked");
                    None
                }
            };
            let mut wake = tokio::time::Instant::now() + until(&ex, next);
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep_until(wake) => break,
                    change = changes.recv() => match change {
                        Ok(c) => {
                            if let Some((t, _)) = c.envelope.deadline() {
                                let sooner = tokio::time::Instant::now() + until(&ex, Some(t));
                                wake = wake.min(sooner);
                            }
                        }
                        Err(RecvError::Lagged(_)) => break,
                        Err(RecvError::Closed) => return,
                    },
                }
            }
        }
    })
}

/// How long from now until `deadline` (a little after it, so the sweep finds it due), at most
/// [`MOST`].
fn until(ex: &Exchange, deadline: Option<Timestamp>) -> Duration {
    let Some(deadline) = deadline else {
        return MOST;
    };
    let ahead = (deadline - ex.now()).to_std().unwrap_or(Duration::ZERO);
    (ahead + Duration::from_millis(10)).min(MOST)
}

impl Upkeep<'_> {
    /// Expires every overdue pending, waiting or held thread and returns the earliest
    /// deadline still ahead. A process that keeps the open threads in memory looks only at
    /// those due, unless `full`: then (and elsewhere always) every open thread is read and
    /// settled, which also catches work a process that died left undone (and escrows whose
    /// request it never wrote).
    pub fn sweep_expiry(&self, full: bool) -> Result<Option<Timestamp>, Error> {
        self.ex.changes().refresh_queue();
        let now = self.ex.now();
        if !full && let Some(due) = self.ex.queue.due(now) {
            for thread in &due.overdue {
                match self.ex.store().envelope(thread) {
                    Ok((env, _)) => {
                        crate::exchange::lifecycle::settle(self.ex, &env, now)?;
                    }
                    // Gone, or unreadable (fsck's business): the next rebuild forgets it.
                    Err(e) => tracing::debug!(thread = %thread, error = %e, "not settled"),
                }
            }
            return Ok(due.next);
        }
        self.ex.routing().settle_pending()?;
        if let Err(e) = self.ex.marketplace().sweep_orphan_escrows() {
            tracing::warn!(error = %e, "cannot sweep escrows whose request was never written");
        }
        let now = self.ex.now();
        let (open, _) = self
            .ex
            .store()
            .list(&[State::Received, State::Executing], false);
        Ok(open
            .iter()
            .filter_map(|(env, _, _)| env.deadline().map(|(t, _)| t))
            .filter(|t| *t > now)
            .min())
    }
}

impl Upkeep<'_> {
    /// Moves finished and canceled threads last updated more than `older_than` ago to the archive.
    pub fn archive(
        &self,
        older_than: chrono::TimeDelta,
        progress: &mut dyn FnMut(usize, usize),
    ) -> ArchiveReport {
        let cutoff = self.ex.now() - older_than;
        self.ex.store.archive(cutoff, progress)
    }

    /// Checks (and with `repair`, fixes) every thread file.
    pub fn fsck(
        &self,
        repair: bool,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<FsckReport, Error> {
        let report = self.ex.store.fsck(repair, progress)?;
        if repair {
            // With the files and indexes sound again, finish what interrupted writers left:
            // overdue expiries and dependents of threads that reached a final status.
            crate::exchange::lifecycle::settle_all(self.ex, self.ex.now())?;
        }
        Ok(report)
    }

    /// Makes the home's folders and, given `example_config`, writes it as config.yaml when
    /// there is none; true when it wrote one.
    pub fn init_home(&self, example_config: Option<&str>) -> Result<bool, Error> {
        self.ex.store.init()?;
        match example_config {
            Some(text) => Ok(self.ex.store.init_config(text)?),
            None => Ok(false),
        }
    }

    /// The lock one `mess serve` per home holds while it runs; `None` when another holds it.
    pub fn serve_lock(&self) -> Result<Option<ServeLock>, Error> {
        Ok(self.ex.store.serve_lock()?)
    }

    /// Finishes what writers that died (a crash, a kill) left half-done; what it repaired.
    pub fn heal_interrupted_writes(&self) -> Result<Vec<Finding>, Error> {
        Ok(self.ex.store.heal_interrupted_writes()?)
    }
}
