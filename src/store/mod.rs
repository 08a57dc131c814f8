//! The exchange's system of record. Tier 0: MESSE-AF thread files on disk (the `state=`
//! folders, crash-safe writes, cross-process locks, ref allocation, the archive, and the small
//! indexes that avoid scanning), which are the source of truth. Tier 1: the same operations on
//! PostgreSQL (`pg`), with the home as a read-only mirror of the files. Synchronous; knows
//! nothing about HTTP, SQL queries or notifications.

pub mod archive;
mod contract;
pub mod disk_probe;
pub mod error;
mod files;
pub mod fsck;
pub(crate) mod fsio;
pub(crate) mod index;
pub mod keys;
pub mod layout;
pub mod ledger;
pub(crate) mod lock;
pub mod outbox;
pub mod postgres;
pub(crate) mod refs;
pub mod registry;
pub mod short;
#[cfg(test)]
pub(crate) mod testing;
pub mod thread;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::NaiveDate;

use crate::protocol::envelope::{Envelope, MessageDoc};
use crate::protocol::ids::ThreadRef;
use crate::protocol::status::State;
use crate::store::error::StoreError;
use crate::store::layout::{Layout, Location};
use crate::store::thread::ThreadFile;

pub use crate::store::contract::{FOLLOW_PASS_EVERY, Following};
pub use crate::store::index::Key as IndexKey;
pub use crate::store::postgres::memo::HeadMemo;

/// Called with the new envelope after every committed write of a thread (on the writing
/// thread, with the thread's lock held: it must be quick).
pub type Observer = Arc<dyn Fn(&Envelope) + Send + Sync>;

/// Called with the thread as it is and the edit about to be written, before every write of a
/// thread that changes it: what it adds to the edit (notices to queue) is written with it.
pub type EditHook = Arc<dyn Fn(&ThreadFile, &mut Edit) + Send + Sync>;

/// What an exchange stores, and the one contract for it: threads, indexes, locks, the outbox,
/// keys, the registry, the ledger and short links, over one of two backends. Every operation
/// is a method here that sends the call to the backend in effect, so nothing above the store
/// names a backend.
#[derive(Clone)]
pub struct Store {
    /// The home: the files of the exchange (files backend) or of a node's read-only mirror
    /// (postgres backend).
    layout: Layout,
    observer: Option<Observer>,
    editing: Option<EditHook>,
    backend: Backend,
    /// What this process knows of the home's files (files backend), shared by every clone.
    known: Arc<files::Known>,
}

/// The two backends of the store, each in its own folder.
#[derive(Clone)]
enum Backend {
    /// `files` (tier 0): the home's MESSE-AF files are the source of truth.
    Files,
    /// `postgres` (tier 1): one database for every node; the home is a mirror.
    Postgres(Box<postgres::Pg>),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Store");
        d.field("layout", &self.layout)
            .field("observed", &self.observer.is_some());
        match &self.backend {
            Backend::Files => d.field("backend", &"files"),
            Backend::Postgres(db) => d.field("backend", db),
        };
        d.finish()
    }
}

/// The lock file of the home's background work.
const WORKER_LOCK: &str = "worker.lock";

/// The one-server-per-home lock, held while it lives.
#[derive(Debug)]
pub struct ServeLock {
    _held: lock::Lock,
}

/// The home's background-work lock (routing passes, deadlines, notice delivery), held while it
/// lives: one process per home (per database in tier 1) does that work, or every notice would
/// go out twice.
#[derive(Debug)]
pub struct WorkerLock {
    _held: Held,
}

/// An exclusive hold on one sender's request creation, across processes (and nodes);
/// released on drop.
#[derive(Debug)]
pub struct SenderGuard {
    _lock: Held,
}

/// A lock of either tier: a lock file, or a database session lock (a node that dies frees it).
enum Held {
    File(lock::Lock),
    Session(Box<postgres::SessionLock>),
    Connection(
        #[expect(
            dead_code,
            reason = "held, never read: the lock lives as long as the session"
        )]
        Box<::postgres::Client>,
    ),
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Held::File(l) => l.fmt(f),
            Held::Session(l) => l.fmt(f),
            Held::Connection(_) => f.write_str("database session lock"),
        }
    }
}

/// What a modification writes: the new envelope and the documents to append.
#[derive(Debug, Clone)]
pub struct Edit {
    /// The envelope after the change.
    pub envelope: Envelope,
    /// Message documents to append, in order.
    pub append: Vec<MessageDoc>,
    /// Notices the change queues (a routing decision's): durable before the change is (on
    /// files, queued first; in tier 1, in the same transaction), so no recorded decision is
    /// without its notices; a notice already queued under its id is not queued again.
    pub deliveries: Vec<outbox::Delivery>,
}

impl Store {
    /// The store of the home at `root` on files; nothing is created until something is
    /// written.
    pub fn open(root: &Path) -> Store {
        Store {
            layout: Layout::new(root),
            observer: None,
            editing: None,
            backend: Backend::Files,
            known: Arc::default(),
        }
    }

    /// The store of a database (the postgres backend), mirrored into the home at `root`.
    pub fn on_database(root: &Path, database: postgres::Pg) -> Store {
        Store {
            layout: Layout::new(root),
            observer: None,
            editing: None,
            backend: Backend::Postgres(Box::new(database)),
            known: Arc::default(),
        }
    }

    /// The same store as another process opens it: the home and backend, no observer or hook.
    #[cfg(test)]
    pub(crate) fn reopened(&self) -> Store {
        Store {
            layout: self.layout.clone(),
            observer: None,
            editing: None,
            backend: self.backend.clone(),
            known: Arc::default(),
        }
    }

    /// The database, on the postgres backend: for what only that backend has (`mess db`, its
    /// mail, moving a home between backends). Everything the exchange stores goes through the
    /// contract instead.
    pub(crate) fn database(&self) -> Option<&postgres::Pg> {
        match &self.backend {
            Backend::Files => None,
            Backend::Postgres(db) => Some(db.as_ref()),
        }
    }

    /// The files backend over this home.
    fn files(&self) -> files::Files<'_> {
        files::Files {
            layout: &self.layout,
            observer: self.observer.as_ref(),
            known: &self.known,
        }
    }

    /// Tells the mirror's followers (this node's at once, the others' through the database)
    /// that a write committed.
    pub(crate) fn committed(&self) {
        if let Backend::Postgres(db) = &self.backend {
            db.committed();
        }
    }

    /// Tells the observer about `thread` as the mirror now holds it (tier 1: called by the
    /// mirror's follower once the file is written).
    pub fn announce(&self, envelope: &Envelope) {
        self.changed(envelope);
    }

    /// True when the thread file at `path` is still the one this process last wrote there:
    /// a change it announced already (see [`files::Known`]).
    pub(crate) fn is_own_write(&self, path: &Path) -> bool {
        self.known.is_own(path)
    }

    /// Starts following the names of the home's thread files: the caller reports each name
    /// that appears ([`Store::saw_name`]), and lookups stop trying the short `.messe-af`
    /// suffix while no file has it. For a process that watches the home.
    pub(crate) fn follow_names(&self) {
        if matches!(self.backend, Backend::Files) {
            self.known.look_over_suffixes(&self.layout);
        }
    }

    /// A thread file name appeared in the home (see [`Store::follow_names`]).
    pub(crate) fn saw_name(&self, name: &str) {
        self.known.saw_name(name);
    }

    /// The same store, telling `observer` about every thread it writes from now on.
    pub fn observed(mut self, observer: Observer) -> Store {
        self.observer = Some(observer);
        self
    }

    /// The same store, letting `hook` add to every edit before it is written.
    pub fn edited(mut self, hook: EditHook) -> Store {
        self.editing = Some(hook);
        self
    }

    fn changed(&self, envelope: &Envelope) {
        if let Some(observer) = &self.observer {
            observer(envelope);
        }
    }

    /// Holds the home's server lock while the returned guard lives; `None` when another
    /// process holds it (one server per home: two would each send every notification).
    pub fn serve_lock(&self) -> Result<Option<ServeLock>, StoreError> {
        Ok(lock::try_acquire(&self.layout.locks_dir(), "serve.lock")?
            .map(|held| ServeLock { _held: held }))
    }

    /// Holds the home's background-work lock while the returned guard lives; `None` when
    /// another process does that work (on the postgres backend: on any node).
    pub fn worker_lock(&self) -> Result<Option<WorkerLock>, StoreError> {
        match &self.backend {
            Backend::Postgres(db) => {
                Ok(db
                    .try_session_lock("singleton:worker")?
                    .map(|client| WorkerLock {
                        _held: Held::Connection(Box::new(client)),
                    }))
            }
            Backend::Files => Ok(
                lock::try_acquire(&self.layout.locks_dir(), WORKER_LOCK)?.map(|held| WorkerLock {
                    _held: Held::File(held),
                }),
            ),
        }
    }

    /// Whether some process holds the background-work lock now. The probe takes the lock for
    /// an instant when it is free; a process standing by to take over just tries again.
    pub fn worker_alive(&self) -> Result<bool, StoreError> {
        Ok(self.worker_lock()?.is_none())
    }

    /// Where things live.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Creates the folders of a home.
    pub fn init(&self) -> Result<(), StoreError> {
        for state in State::ALL {
            fsio::ensure_dir(&self.layout.state_dir(state))?;
        }
        fsio::ensure_dir(&self.layout.archive_dir())?;
        fsio::ensure_dir(&self.layout.locks_dir())?;
        Ok(())
    }

    /// Allocates `n` new refs for `date` (UTC).
    pub fn allocate_refs(&self, date: NaiveDate, n: usize) -> Result<Vec<ThreadRef>, StoreError> {
        match &self.backend {
            Backend::Files => refs::allocate(&self.layout, date, n),
            Backend::Postgres(db) => db.allocate_refs(date, n),
        }
    }

    /// Writes a new thread into the folder of its status; fails if the ref exists.
    pub fn create(&self, envelope: &Envelope, docs: &[MessageDoc]) -> Result<PathBuf, StoreError> {
        match &self.backend {
            Backend::Files => self.files().create(envelope, docs),
            Backend::Postgres(db) => {
                let location = Location::State(envelope.status.state());
                let text = thread::new_thread_text(envelope, docs);
                db.create(&envelope.thread_ref, envelope, &text)?;
                self.committed();
                Ok(self.layout.thread_path(&location, &envelope.thread_ref))
            }
        }
    }

    /// Every copy of a thread's file (more than one only after an interrupted move, on files),
    /// checked in lifecycle order so a concurrent forward move is never missed; on the postgres
    /// backend, where the mirror holds it.
    pub fn find(&self, thread: &ThreadRef) -> Result<Vec<(Location, PathBuf)>, StoreError> {
        match &self.backend {
            Backend::Files => self.files().find(thread),
            Backend::Postgres(db) => Ok(db
                .head(thread)?
                .map(|(_, location)| {
                    let path = self.layout.thread_path(&location, thread);
                    (location, path)
                })
                .into_iter()
                .collect()),
        }
    }

    /// Reads a thread; `NotFound` when no file holds it. On files, an envelope that no longer
    /// accounts for the messages (a hand edit) is rebuilt and written back first (see
    /// [`Store::heal`]).
    pub fn read(&self, thread: &ThreadRef) -> Result<ThreadFile, StoreError> {
        match &self.backend {
            Backend::Files => self.files().read(thread),
            Backend::Postgres(db) => {
                let stored = db.read(thread)?.ok_or_else(|| StoreError::NotFound {
                    thread: thread.to_string(),
                })?;
                let path = self.layout.thread_path(&stored.location, thread);
                ThreadFile::parse(&path, stored.location, stored.text)
            }
        }
    }

    /// Reads only the envelope of a thread, without loading its messages (on files, unless the
    /// file changed behind mess's back: then it is healed first).
    pub fn envelope(&self, thread: &ThreadRef) -> Result<(Envelope, Location), StoreError> {
        match &self.backend {
            Backend::Files => self.files().envelope(thread),
            Backend::Postgres(db) => {
                let (head, location) = db.head(thread)?.ok_or_else(|| StoreError::NotFound {
                    thread: thread.to_string(),
                })?;
                let path = self.layout.thread_path(&location, thread);
                Ok((
                    ThreadFile::parse(&path, location.clone(), head)?.envelope,
                    location,
                ))
            }
        }
    }

    /// Rebuilds the envelope of a thread whose messages changed behind mess's back (MESSE-AF's
    /// recipes append with `cat >>`) and writes it back; returns the thread as it now is. Only
    /// mess writes the database, so on the postgres backend there is nothing to heal.
    pub fn heal(&self, thread: &ThreadRef) -> Result<ThreadFile, StoreError> {
        match &self.backend {
            Backend::Files => self.files().heal(thread),
            Backend::Postgres(_) => self.read(thread),
        }
    }

    /// Changes a thread as one write: `decide` sees the current thread and returns an [`Edit`]
    /// to write (or `None`) plus a result; the store's edit hook adds to the edit, and the
    /// edit's deliveries are durable with (files: before) the change. On files the thread's
    /// lock is held throughout; on the postgres backend `decide` runs again when another writer
    /// came first, so it must only decide.
    pub fn modify<T, E: From<StoreError>>(
        &self,
        thread: &ThreadRef,
        mut decide: impl FnMut(&ThreadFile) -> Result<(Option<Edit>, T), E>,
    ) -> Result<T, E> {
        let hook = self.editing.clone();
        let decide = move |t: &ThreadFile| -> Result<(Option<Edit>, T), E> {
            let (edit, out) = decide(t)?;
            let edit = edit.map(|mut e| {
                if let Some(hook) = &hook {
                    hook(t, &mut e);
                }
                e
            });
            Ok((edit, out))
        };
        match &self.backend {
            Backend::Files => self.files().modify(thread, decide),
            Backend::Postgres(db) => {
                let (out, written) = db.modify(&self.layout, thread, decide)?;
                if written.is_some() {
                    self.committed();
                }
                Ok(out)
            }
        }
    }

    /// Reads the envelopes of every thread in `states` (and the archive when asked). Threads
    /// that do not parse are returned as errors beside the good ones.
    pub fn list(
        &self,
        states: &[State],
        archive: bool,
    ) -> (Vec<(Envelope, Location, PathBuf)>, Vec<StoreError>) {
        match &self.backend {
            Backend::Files => self.files().list(states, archive),
            Backend::Postgres(db) => {
                let heads = match db.heads(states, archive) {
                    Ok(heads) => heads,
                    Err(e) => return (Vec::new(), vec![e]),
                };
                let mut out = Vec::with_capacity(heads.len());
                let mut errors = Vec::new();
                for (head, location) in heads {
                    match ThreadFile::parse(Path::new(""), location.clone(), head) {
                        Ok(t) => {
                            let path = self.layout.thread_path(&location, &t.envelope.thread_ref);
                            out.push((t.envelope, location, path));
                        }
                        Err(e) => errors.push(e),
                    }
                }
                (out, errors)
            }
        }
    }

    /// The thread files in `states` (and the archive), with their locations (on the postgres
    /// backend, the mirror's).
    pub fn files_in(
        &self,
        states: &[State],
        archive: bool,
        errors: &mut Vec<StoreError>,
    ) -> Vec<(Location, PathBuf)> {
        self.files().files(states, archive, errors)
    }

    /// Takes the lock that serialises request creation by `sender` (taken before the refs and
    /// thread locks, never while holding them).
    pub fn lock_sender(&self, sender: &str) -> Result<SenderGuard, StoreError> {
        if let Backend::Postgres(db) = &self.backend {
            let held = db.session_lock(&format!("sender:{sender}"))?;
            return Ok(SenderGuard {
                _lock: Held::Session(Box::new(held)),
            });
        }
        let lock = lock::acquire(&self.layout.locks_dir(), &lock::sender_lock_name(sender))?;
        Ok(SenderGuard {
            _lock: Held::File(lock),
        })
    }

    /// Remembers index entries of `sender` (client id, `last`, suggestion ids).
    pub fn remember(
        &self,
        sender: &str,
        entries: &[(IndexKey<'_>, &ThreadRef)],
    ) -> Result<(), StoreError> {
        if let Backend::Postgres(db) = &self.backend {
            return db.remember(sender, entries);
        }
        index::put(&self.layout, sender, entries)
    }

    /// Looks up an index entry of `sender`.
    pub fn lookup(&self, sender: &str, key: IndexKey<'_>) -> Result<Option<ThreadRef>, StoreError> {
        if let Backend::Postgres(db) = &self.backend {
            return db.lookup(sender, key);
        }
        index::get(&self.layout, sender, key)
    }

    /// Records that `dependent` waits for `dependency`.
    pub fn add_dependent(
        &self,
        dependency: &ThreadRef,
        dependent: &ThreadRef,
    ) -> Result<(), StoreError> {
        if let Backend::Postgres(db) = &self.backend {
            return db.add_dependent(dependency, dependent);
        }
        index::add_dependent(&self.layout, dependency, dependent)
    }

    /// The threads that wait for `dependency`.
    pub fn dependents(&self, dependency: &ThreadRef) -> Result<Vec<ThreadRef>, StoreError> {
        if let Backend::Postgres(db) = &self.backend {
            return db.dependents(dependency);
        }
        index::dependents(&self.layout, dependency)
    }
}

/// Reads just the first document of a thread file and parses the envelope; `None` if the file
/// vanished (moved by a concurrent writer).
pub fn read_envelope_file(path: &Path) -> Result<Option<Envelope>, StoreError> {
    files::read_envelope_file(path)
}
