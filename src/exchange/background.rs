//! The home's background work (routing passes, deadlines, mail pruning, notice delivery,
//! following peer exchanges, reading Matrix replies), done by exactly one long-lived process per home: whichever
//! `mess serve` or `mess mcp` takes the worker lock first. The others stand by and take over
//! when it exits, so a household running only an agent host's `mess mcp` still notifies its
//! executors. In tier 1 the lock is the database's (one node at a time), and every node sends
//! notices.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::exchange::jobs::Outbox;
use crate::exchange::{Exchange, jobs, mail_sweep, matrix, peers, route, sweep};
use crate::notify::Notifier;
use crate::store::outbox::Shelf;

/// How often a process standing by tries the worker lock: the longest a home goes without
/// its background work after the process doing it exits.
const TAKEOVER: Duration = Duration::from_secs(2);

/// Runs the home's background work until `stop`, once this process holds the worker lock
/// (trying again every 2 s while another process holds it).
pub fn run(
    ex: Exchange,
    notifier: Notifier,
    stop: CancellationToken,
    retry: Duration,
) -> tokio::task::JoinHandle<()> {
    // Tier 1: every node sends notices (deliveries are leased row by row); only routing,
    // deadlines and pruning need the one holder of the lock.
    let everywhere = ex
        .store()
        .is_shared_by_nodes()
        .then(|| jobs::run(ex.clone(), notifier.clone(), stop.clone()));
    tokio::spawn(async move {
        let mut said = false;
        let held = loop {
            let probe = ex.clone();
            match tokio::task::spawn_blocking(move || probe.store().worker_lock()).await {
                Ok(Ok(Some(held))) => break held,
                Ok(Ok(None)) if !said => {
                    said = true;
                    tracing::info!(
                        "another process routes and notifies for this home; standing by to take over"
                    );
                }
                Ok(Err(e)) if !said => {
                    said = true;
                    tracing::warn!(error = %e, "cannot take the worker lock; notices wait for another process");
                }
                _ => {}
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(TAKEOVER) => {}
            }
        };
        tracing::info!("this process routes requests and sends notices for the home");
        let mut tasks = vec![
            route::run(ex.clone(), stop.clone(), retry),
            sweep::run(ex.clone(), stop.clone()),
            mail_sweep::run(ex.clone(), stop.clone()),
            peers::run(ex.clone(), stop.clone()),
            matrix::run(ex.clone(), notifier.clone(), stop.clone()),
        ];
        tasks.push(match everywhere {
            Some(task) => task,
            None => jobs::run(ex, notifier, stop),
        });
        // A pass or a delivery in flight finishes its writes before the lock goes.
        for task in tasks {
            let _ = task.await;
        }
        drop(held);
    })
}

/// `after` as people write it: `60s`, `2m`, or `300ms` below a second.
fn humantime(after: Duration) -> String {
    match after.as_secs() {
        0 => format!("{}ms", after.as_millis()),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

impl Outbox<'_> {
    /// A warning when notices wait with nobody to send them: queued while no process holds the
    /// worker lock, or due for longer than `dispatch.overdue` (the process holding it seems
    /// stuck). `None` when the queue is empty or moving.
    pub fn notices_stalled(&self) -> Option<String> {
        let store = self.ex.store();
        if !store.has_deliveries(Shelf::Queue) {
            return None;
        }
        // Only what needs someone reached (people, robots, peers, callbacks): the exchange's
        // own work is finished by whichever command touches the home.
        let (mut queued, _) = store.deliveries(Shelf::Queue);
        queued.retain(|d| !d.job.is_internal());
        if queued.is_empty() {
            return None;
        }
        let n = queued.len();
        let notices = if n == 1 { "notice" } else { "notices" };
        // A probe that cannot open the lock file counts as nobody working.
        if !store.worker_alive().unwrap_or(false) {
            return Some(format!(
                "{n} {notices} queued and no process sends them: run `mess serve`, or keep an agent host's `mess mcp` running"
            ));
        }
        let after = self.ex.settings().dispatch.overdue;
        let overdue = chrono::Duration::from_std(after).ok()?;
        let now = self.ex.now();
        let late = queued.iter().filter(|d| now - d.due > overdue).count();
        (late > 0).then(|| {
            format!(
                "{late} {} due for over {} and not sent: the process sending notices seems stuck (restart `mess serve` or the agent host)",
                if late == 1 { "notice" } else { "notices" },
                humantime(after)
            )
        })
    }
}
