//! Changes written by other processes: the file system reports thread files renamed or written
//! into the `state=` folders (inotify on Linux; nothing polls), and the exchange announces them
//! on the same change bus as its own writes, each change once. In tier 1 the mirror's follower
//! does this for every node's writes, its own included.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ::notify::{EventKind, RecursiveMode, Watcher as _};

use crate::exchange::{Error, Exchange, ThreadChange, view};
use crate::mail::Mail;
use crate::protocol::envelope::Envelope;
use crate::protocol::ids::ThreadRef;
use crate::protocol::status::State;
use crate::protocol::time::Timestamp;
use crate::store::layout::ref_of_file;
use crate::store::{FOLLOW_PASS_EVERY, Following};

/// The changes of threads as they happen: subscribing, catching up from a cursor, and
/// following other processes' writes.
#[derive(Clone, Copy)]
pub struct Changes<'a> {
    pub(super) ex: &'a Exchange,
}

impl Exchange {
    /// Thread changes: subscribe, catch up, follow the home.
    pub fn changes(&self) -> Changes<'_> {
        Changes { ex: self }
    }
}

/// The last version announced per thread (the length of its history, then its `updated`), so
/// that a change seen both in-process and through the file system is announced once.
#[derive(Debug, Default)]
pub(crate) struct Announced {
    last: Mutex<HashMap<ThreadRef, (usize, Timestamp)>>,
}

/// Threads remembered before the memory starts over (a forgotten thread is at worst announced
/// twice).
const REMEMBERED: usize = 100_000;

impl Announced {
    /// Records the version of `envelope`; false when that change was announced already.
    pub(crate) fn first(&self, envelope: &Envelope) -> bool {
        let thread = &envelope.thread_ref;
        // History only grows, one entry or more per write, in the order writes commit; the
        // `updated` instant does not always (a write may take its time before another that
        // commits first), so it only orders writes that add no history.
        let version = (envelope.history.len(), envelope.updated);
        let mut last = match self.last.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if last.get(thread).is_some_and(|v| *v >= version) {
            return false;
        }
        if last.len() >= REMEMBERED {
            last.clear();
        }
        last.insert(thread.clone(), version);
        true
    }
}

/// A running watch of the home (or, in tier 1, the mirror's follower); it stops when dropped.
pub struct HomeWatch {
    _watcher: Option<::notify::RecommendedWatcher>,
    stop: Option<Arc<AtomicBool>>,
}

impl Drop for HomeWatch {
    fn drop(&mut self) {
        if let Some(stop) = &self.stop {
            stop.store(true, Ordering::Relaxed);
        }
    }
}

impl std::fmt::Debug for HomeWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HomeWatch")
    }
}

/// How often a follower looks at the change feed when nothing woke it.
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<(), Error> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(f)
        .map(|_| ())
        .map_err(|e| {
            Error::Store(crate::store::error::StoreError::Other {
                message: format!("starting {name}: {e}"),
            })
        })
}

fn watch_error(e: &::notify::Error) -> Error {
    Error::Store(crate::store::error::StoreError::Io {
        path: std::path::PathBuf::from("state=*"),
        source: std::io::Error::other(format!("watching the home: {e}")),
    })
}

impl Changes<'_> {
    /// Starts announcing the thread changes other processes write (another `mess` command, a
    /// server, a tool writing files), for as long as the returned watch lives.
    pub fn watch_home(&self) -> Result<HomeWatch, Error> {
        self.ex.store().init()?;
        if let Some(following) = self.ex.store().following()? {
            return self.follow_database(following);
        }
        let ex = self.ex.clone();
        let mut watcher =
            ::notify::recommended_watcher(move |event: ::notify::Result<::notify::Event>| {
                let Ok(event) = event else { return };
                if !matches!(
                    event.kind,
                    EventKind::Create(_) | EventKind::Modify(_) | EventKind::Any
                ) {
                    return;
                }
                for path in &event.paths {
                    ex.changes().announce_file(path);
                }
            })
            .map_err(|e| watch_error(&e))?;
        for state in State::ALL {
            watcher
                .watch(
                    &self.ex.store().layout().state_dir(state),
                    RecursiveMode::NonRecursive,
                )
                .map_err(|e| watch_error(&e))?;
        }
        // Watching first: a name that appears during the look is reported by the watch.
        self.ex.store().follow_names();
        self.follow_queue()?;
        Ok(HomeWatch {
            _watcher: Some(watcher),
            stop: None,
        })
    }

    /// Tier 1: brings the mirror up to date, then follows the database's change feed on a
    /// thread of its own, writing each changed thread's file and announcing it, woken by this
    /// process's commits, by other nodes' notifications, and at least once a second.
    fn follow_database(&self, mut following: Following) -> Result<HomeWatch, Error> {
        let layout = self.ex.store().layout().clone();
        let stop = Arc::new(AtomicBool::new(false));
        let listening = {
            let (listen, stop) = (following.listener(), stop.clone());
            move || listen(stop)
        };
        spawn("mess-listen", listening)?;
        let ex = self.ex.clone();
        let following = {
            let stop = stop.clone();
            move || {
                let (mail, mirror) = (ex.mail(), Mail::open(layout.root()));
                let (mut mail_seen, mut mail_looked) = (None, None::<Instant>);
                while !stop.load(Ordering::Relaxed) {
                    // Mail reaches the mirror within a second; looking on every pass would
                    // add a query to each change under load.
                    if mail_looked.is_none_or(|t| t.elapsed() >= FOLLOW_EVERY) {
                        mail_looked = Some(Instant::now());
                        match mail.version() {
                            Ok(now) if now != mail_seen => match mail.mirror_into(&mirror) {
                                Ok(_) => mail_seen = now,
                                Err(e) => tracing::warn!(error = %e, "mirroring agent mail"),
                            },
                            Ok(_) => {}
                            Err(e) => tracing::warn!(error = %e, "mirroring agent mail"),
                        }
                    }
                    let began = Instant::now();
                    let mut found = false;
                    match following.pass() {
                        Ok(applied) => {
                            found = !applied.is_empty();
                            let now = ex.now().with_timezone(&chrono::Utc);
                            crate::exchange::telemetry::follower_pass(applied.iter().map(
                                |(env, _)| {
                                    (now - env.updated.with_timezone(&chrono::Utc)).as_seconds_f64()
                                },
                            ));
                            for (envelope, cursor) in applied {
                                ex.changes().announce_envelope(envelope, Some(cursor));
                            }
                        }
                        Err(e) => tracing::warn!(error = %e, "following the database"),
                    }
                    if following.behind() {
                        continue;
                    }
                    if following.write_due() == Some(Duration::ZERO)
                        && let Err(e) = following.write()
                    {
                        tracing::warn!(error = %e, "writing the mirror");
                    }
                    following.wait(
                        following
                            .write_due()
                            .map_or(FOLLOW_EVERY, |d| d.max(FOLLOW_PASS_EVERY).min(FOLLOW_EVERY)),
                    );
                    // While commits keep coming, the next pass reads several of them at once.
                    if found {
                        std::thread::sleep(FOLLOW_PASS_EVERY.saturating_sub(began.elapsed()));
                    }
                }
            }
        };
        spawn("mess-mirror", following)?;
        self.follow_queue()?;
        Ok(HomeWatch {
            _watcher: None,
            stop: Some(stop),
        })
    }

    /// Keeps the open threads from now on, their first index built on a thread of its own
    /// from the store.
    fn follow_queue(&self) -> Result<(), Error> {
        let ex = self.ex.clone();
        spawn("mess-queue", move || {
            ex.queue.follow(|| view::open(&ex));
        })
    }

    /// Rebuilds the index of open threads from the store on a thread of its own when it is
    /// due (see [`REBUILD_EVERY`](crate::exchange::queue::REBUILD_EVERY)); the old index serves
    /// meanwhile.
    pub(crate) fn refresh_queue(&self) {
        if !self.ex.queue.stale() {
            return;
        }
        let ex = self.ex.clone();
        let _ = spawn("mess-queue", move || ex.queue.rebuild(|| view::open(&ex)));
    }

    /// Announces `envelope` on the change bus unless this change was announced already.
    pub(crate) fn announce_envelope(&self, envelope: Envelope, cursor: Option<String>) {
        self.ex.queue.note(&envelope);
        self.refresh_queue();
        if self.ex.announced.first(&envelope) {
            let _ = self.ex.changes.send(ThreadChange {
                thread: envelope.thread_ref.clone(),
                status: envelope.status,
                updated: envelope.updated,
                envelope: Arc::new(envelope),
                cursor,
            });
        }
    }

    /// Announces the thread of `path` if it is a thread file with a change not yet announced.
    fn announce_file(&self, path: &Path) {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            return;
        };
        self.ex.store().saw_name(name);
        // Temp files of interrupted or ongoing writes are hidden; only finished files count.
        if name.starts_with('.') {
            return;
        }
        let Some(thread) = ref_of_file(name) else {
            return;
        };
        if self.ex.store().is_own_write(path) {
            return;
        }
        let Ok((envelope, _)) = self.ex.store().envelope(&thread) else {
            return;
        };
        self.announce_envelope(envelope, None);
    }
}

impl Changes<'_> {
    /// The changes after `cursor` (an `/events` id from any node, tier 1), oldest first, each
    /// thread once as it is now; at most `limit` threads. Some may have been sent before the
    /// cursor was (a resume sends at least everything missed). Empty on files, or for a cursor
    /// of another form; `None` when the cursor is older than the change feed keeps
    /// (`FEED_KEEP_DAYS`), so changes may be missing.
    pub fn changes_since(
        &self,
        cursor: &str,
        limit: usize,
    ) -> Result<Option<Vec<ThreadChange>>, Error> {
        let Some(horizon) = cursor
            .split_once('-')
            .and_then(|(h, _)| h.parse::<u64>().ok())
        else {
            return Ok(Some(Vec::new()));
        };
        let Some(changed) = self.ex.store.changed_since(horizon, limit)? else {
            return Ok(None);
        };
        let mut out = Vec::new();
        for (thread, id) in changed {
            if let Ok((envelope, _)) = self.ex.store.envelope(&thread) {
                out.push(ThreadChange {
                    thread,
                    status: envelope.status,
                    updated: envelope.updated,
                    envelope: Arc::new(envelope),
                    cursor: Some(format!("{horizon}-{id}")),
                });
            }
        }
        Ok(Some(out))
    }

    /// Listens to the changes this exchange writes from now on (waits, events, MCP resource
    /// updates). A listener that falls more than a few thousand changes behind gets a `Lagged`
    /// error and should re-read what it watches.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<ThreadChange> {
        self.ex.changes.subscribe()
    }
}
