//! The exchange's system of record. Tier 0: MESSE-AF thread files on disk (the `state=`
//! folders, crash-safe writes, cross-process locks, ref allocation, the archive, and the small
//! indexes that avoid scanning), which are the source of truth. Tier 1: the same operations on
//! PostgreSQL (`pg`), with the home as a read-only mirror of the files. Synchronous; knows
//! nothing about HTTP, SQL queries or notifications.

pub mod archive;
pub mod error;
pub mod fsck;
pub(crate) mod fsio;
pub(crate) mod index;
pub mod keys;
pub mod layout;
pub mod ledger;
pub(crate) mod lock;
pub mod outbox;
pub mod pg;
pub(crate) mod refs;
pub mod registry;
pub mod short;
pub mod thread;

#[cfg(test)]
mod tests;

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::NaiveDate;

use crate::protocol::envelope::{Envelope, MessageDoc};
use crate::protocol::ids::ThreadRef;
use crate::protocol::status::State;
use crate::protocol::yaml::{self, Limits};
use crate::store::error::StoreError;
use crate::store::layout::{Layout, Location};
use crate::store::thread::{Freshness, ThreadFile};

pub use crate::store::index::Key as IndexKey;
pub use crate::store::pg::memo::HeadMemo;

/// Called with the new envelope after every committed write of a thread (on the writing
/// thread, with the thread's lock held: it must be quick).
pub type Observer = Arc<dyn Fn(&Envelope) + Send + Sync>;

/// Called with the thread as it is and the edit about to be written, before every write of a
/// thread that changes it: what it adds to the edit (notices to queue) is written with it.
pub type EditHook = Arc<dyn Fn(&ThreadFile, &mut Edit) + Send + Sync>;

/// The threads of one exchange: the files of its home, or (tier 1) a database the home
/// mirrors.
#[derive(Clone)]
pub struct FileStore {
    layout: Layout,
    observer: Option<Observer>,
    editing: Option<EditHook>,
    database: Option<pg::Pg>,
}

impl std::fmt::Debug for FileStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileStore")
            .field("layout", &self.layout)
            .field("observed", &self.observer.is_some())
            .field("database", &self.database)
            .finish()
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
    Session(Box<pg::SessionLock>),
    Connection(
        #[expect(
            dead_code,
            reason = "held, never read: the lock lives as long as the session"
        )]
        Box<postgres::Client>,
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

impl FileStore {
    /// The store of the home at `root`; nothing is created until something is written.
    pub fn open(root: &Path) -> FileStore {
        FileStore {
            layout: Layout::new(root),
            observer: None,
            editing: None,
            database: None,
        }
    }

    /// The store of a database (tier 1), mirrored into the home at `root`.
    pub fn on_database(root: &Path, database: pg::Pg) -> FileStore {
        FileStore {
            layout: Layout::new(root),
            observer: None,
            editing: None,
            database: Some(database),
        }
    }

    /// The database, in tier 1.
    pub fn database(&self) -> Option<&pg::Pg> {
        self.database.as_ref()
    }

    /// Tells the mirror's followers (this node's at once, the others' through the database)
    /// that a write committed.
    pub(crate) fn committed(&self) {
        if let Some(db) = &self.database {
            db.committed();
        }
    }

    /// Tells the observer about `thread` as the mirror now holds it (tier 1: called by the
    /// mirror's follower once the file is written).
    pub fn announce(&self, envelope: &Envelope) {
        self.changed(envelope);
    }

    /// The same store, telling `observer` about every thread it writes from now on.
    pub fn observed(mut self, observer: Observer) -> FileStore {
        self.observer = Some(observer);
        self
    }

    /// The same store, letting `hook` add to every edit before it is written.
    pub fn edited(mut self, hook: EditHook) -> FileStore {
        self.editing = Some(hook);
        self
    }

    fn changed(&self, envelope: &Envelope) {
        if let Some(observer) = &self.observer {
            observer(envelope);
        }
    }

    /// Where things live.
    /// Holds the home's server lock while the returned guard lives; `None` when another
    /// process holds it (one server per home: two would each send every notification).
    pub fn serve_lock(&self) -> Result<Option<ServeLock>, StoreError> {
        Ok(lock::try_acquire(&self.layout.locks_dir(), "serve.lock")?
            .map(|held| ServeLock { _held: held }))
    }

    /// Holds the home's background-work lock while the returned guard lives; `None` when
    /// another process does that work.
    pub fn worker_lock(&self) -> Result<Option<WorkerLock>, StoreError> {
        if let Some(db) = &self.database {
            return Ok(db
                .try_session_lock("singleton:worker")?
                .map(|client| WorkerLock {
                    _held: Held::Connection(Box::new(client)),
                }));
        }
        Ok(
            lock::try_acquire(&self.layout.locks_dir(), WORKER_LOCK)?.map(|held| WorkerLock {
                _held: Held::File(held),
            }),
        )
    }

    /// Whether some process holds the background-work lock now. The probe takes the lock for
    /// an instant when it is free; a process standing by to take over just tries again.
    pub fn worker_alive(&self) -> Result<bool, StoreError> {
        Ok(self.worker_lock()?.is_none())
    }

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
        if let Some(db) = &self.database {
            return db.allocate_refs(date, n);
        }
        refs::allocate(&self.layout, date, n)
    }

    /// Writes a new thread into the folder of its status; fails if the ref exists.
    pub fn create(&self, envelope: &Envelope, docs: &[MessageDoc]) -> Result<PathBuf, StoreError> {
        let location = Location::State(envelope.status.state());
        let path = self.layout.thread_path(&location, &envelope.thread_ref);
        let text = thread::new_thread_text(envelope, docs);
        if let Some(db) = &self.database {
            db.create(&envelope.thread_ref, envelope, &text)?;
            self.committed();
            return Ok(path);
        }
        fsio::ensure_dir(&self.layout.dir(&location))?;
        let _guard = lock::acquire(
            &self.layout.locks_dir(),
            &lock::thread_lock_name(&envelope.thread_ref),
        )?;
        if !self.find(&envelope.thread_ref)?.is_empty() {
            return Err(StoreError::Exists {
                thread: envelope.thread_ref.to_string(),
            });
        }
        fsio::create_atomic(&path, text.as_bytes()).map_err(|e| match e {
            StoreError::Io { source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists => {
                StoreError::Exists {
                    thread: envelope.thread_ref.to_string(),
                }
            }
            other => other,
        })?;
        self.changed(envelope);
        Ok(path)
    }

    /// Every copy of a thread's file (more than one only after an interrupted move), checked in
    /// lifecycle order so a concurrent forward move is never missed.
    pub fn find(&self, thread: &ThreadRef) -> Result<Vec<(Location, PathBuf)>, StoreError> {
        if let Some(db) = &self.database {
            return Ok(db
                .head(thread)?
                .map(|(_, location)| {
                    let path = self.layout.thread_path(&location, thread);
                    (location, path)
                })
                .into_iter()
                .collect());
        }
        let mut found = Vec::new();
        let months = self.archive_months_for(thread)?;
        let locations = State::ALL
            .into_iter()
            .map(Location::State)
            .chain(months.into_iter().map(Location::Archive));
        for loc in locations {
            for path in self.layout.thread_paths(&loc, thread) {
                if path.is_file() {
                    found.push((loc.clone(), path));
                }
            }
        }
        Ok(found)
    }

    fn archive_months_for(&self, thread: &ThreadRef) -> Result<Vec<String>, StoreError> {
        if let Some((date, _)) = thread.date_serial() {
            return Ok(vec![date.format("%Y-%m").to_string()]);
        }
        // Refs of other writers carry no date, so every archive month is a candidate.
        let dir = self.layout.archive_dir();
        match fs::read_dir(&dir) {
            Ok(entries) => Ok(entries
                .flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(StoreError::io(&dir, e)),
        }
    }

    /// Reads a thread; `NotFound` when no file holds it. An envelope that no longer accounts
    /// for the messages (a hand edit) is rebuilt and written back first (see [`FileStore::heal`]).
    pub fn read(&self, thread: &ThreadRef) -> Result<ThreadFile, StoreError> {
        if let Some(db) = &self.database {
            let stored = db.read(thread)?.ok_or_else(|| StoreError::NotFound {
                thread: thread.to_string(),
            })?;
            let path = self.layout.thread_path(&stored.location, thread);
            return ThreadFile::parse(&path, stored.location, stored.text);
        }
        let t = self.read_as_is(thread)?;
        if t.freshness() == Freshness::Current {
            return Ok(t);
        }
        self.heal(thread)
    }

    fn read_as_is(&self, thread: &ThreadRef) -> Result<ThreadFile, StoreError> {
        match self.read_copies(thread)?.into_iter().next() {
            Some(t) => Ok(t),
            None => {
                // A move in the other direction (archive back to a folder) can hide the file
                // from an unlocked look; writers hold the lock while moving.
                let _guard =
                    lock::acquire(&self.layout.locks_dir(), &lock::thread_lock_name(thread))?;
                self.read_copies(thread)?
                    .into_iter()
                    .next()
                    .ok_or_else(|| StoreError::NotFound {
                        thread: thread.to_string(),
                    })
            }
        }
    }

    /// Reads every copy of a thread, the best first: most documents, then latest `updated`.
    fn read_copies(&self, thread: &ThreadRef) -> Result<Vec<ThreadFile>, StoreError> {
        let mut copies = Vec::new();
        for (location, path) in self.find(thread)? {
            match fsio::read_optional(&path)? {
                Some(text) => copies.push(ThreadFile::parse(&path, location, text)?),
                None => continue,
            }
        }
        copies.sort_by(|a, b| {
            b.message_count()
                .cmp(&a.message_count())
                .then(b.envelope.updated.cmp(&a.envelope.updated))
        });
        Ok(copies)
    }

    /// Reads only the envelope of a thread, without loading its messages (unless the file
    /// changed behind mess's back: then it is healed first).
    pub fn envelope(&self, thread: &ThreadRef) -> Result<(Envelope, Location), StoreError> {
        if let Some(db) = &self.database {
            let (head, location) = db.head(thread)?.ok_or_else(|| StoreError::NotFound {
                thread: thread.to_string(),
            })?;
            let path = self.layout.thread_path(&location, thread);
            return Ok((
                ThreadFile::parse(&path, location.clone(), head)?.envelope,
                location,
            ));
        }
        let found = self.find(thread)?;
        if found.len() == 1 {
            let (location, path) = &found[0];
            if let Some((env, Freshness::Current)) = read_envelope_checked(path)? {
                return Ok((env, location.clone()));
            }
        }
        let t = self.read(thread)?;
        Ok((t.envelope, t.location))
    }

    /// Rebuilds the envelope of a thread whose messages changed behind mess's back (MESSE-AF's
    /// recipes append with `cat >>`) and writes it back: the messages are replayed through
    /// [`Envelope::apply`], the rule each message went through when it arrived, and the file
    /// is rewritten atomically into the folder of the status they give. A file whose
    /// documents are not all MESS messages is left exactly as it is (and logged; `mess fsck`
    /// reports it). Returns the thread as it now is.
    pub fn heal(&self, thread: &ThreadRef) -> Result<ThreadFile, StoreError> {
        if self.database.is_some() {
            // Only mess writes the database: there is nothing to heal.
            return self.read(thread);
        }
        let _guard = lock::acquire(&self.layout.locks_dir(), &lock::thread_lock_name(thread))?;
        let copies = self.read_copies(thread)?;
        let Some(current) = copies.first() else {
            return Err(StoreError::NotFound {
                thread: thread.to_string(),
            });
        };
        let Some(envelope) = replay_if_needed(current) else {
            return Ok(current.clone());
        };
        let edit = Edit {
            envelope,
            append: Vec::new(),
            deliveries: Vec::new(),
        };
        let (path, location) = self.write_locked(thread, current, &copies, &edit)?;
        let text = fsio::read_optional(&path)?.ok_or_else(|| StoreError::NotFound {
            thread: thread.to_string(),
        })?;
        ThreadFile::parse(&path, location, text)
    }

    /// Writes `edit` over `current` (the best of `copies`, all read under the thread's lock):
    /// the new text into the folder of the new status, then the stale copies removed.
    fn write_locked(
        &self,
        thread: &ThreadRef,
        current: &ThreadFile,
        copies: &[ThreadFile],
        edit: &Edit,
    ) -> Result<(PathBuf, Location), StoreError> {
        let target = match &current.location {
            Location::Archive(_) if edit.envelope.status == current.envelope.status => {
                current.location.clone()
            }
            _ => Location::State(edit.envelope.status.state()),
        };
        let path = self.layout.thread_path(&target, thread);
        let text = current.compose(&edit.envelope, &edit.append);
        fsio::ensure_dir(&self.layout.dir(&target))?;
        fsio::write_atomic(&path, text.as_bytes())?;
        for copy in copies {
            if copy.path != path {
                fsio::remove_durable(&copy.path)?;
            }
        }
        self.changed(&edit.envelope);
        Ok((path, target))
    }

    /// Changes a thread under its lock: `decide` sees the current file and returns an [`Edit`]
    /// to write (or `None`) plus a result. The write replaces the file atomically, moves it to
    /// the folder of its new status, and removes any stale copies. With a database `decide`
    /// runs again when another writer came first, so it must only decide.
    pub fn modify<T, E: From<StoreError>>(
        &self,
        thread: &ThreadRef,
        mut decide: impl FnMut(&ThreadFile) -> Result<(Option<Edit>, T), E>,
    ) -> Result<T, E> {
        let hook = self.editing.clone();
        let mut decide = move |t: &ThreadFile| -> Result<(Option<Edit>, T), E> {
            let (edit, out) = decide(t)?;
            let edit = edit.map(|mut e| {
                if let Some(hook) = &hook {
                    hook(t, &mut e);
                }
                e
            });
            Ok((edit, out))
        };
        if let Some(db) = &self.database {
            let (out, written) = db.modify(&self.layout, thread, decide)?;
            if written.is_some() {
                self.committed();
            }
            return Ok(out);
        }
        let _guard = lock::acquire(&self.layout.locks_dir(), &lock::thread_lock_name(thread))?;
        let copies = self.read_copies(thread)?;
        let Some(first) = copies.first() else {
            return Err(StoreError::NotFound {
                thread: thread.to_string(),
            }
            .into());
        };
        first.check_tail()?;
        // A hand edit since mess last wrote: the caller decides on the envelope the messages
        // give, and the write (or, if it writes nothing, the heal) records it.
        let healed = replay_if_needed(first);
        let current = match &healed {
            Some(envelope) => first.clone().with_envelope(envelope.clone()),
            None => first.clone(),
        };
        let (edit, out) = decide(&current)?;
        let edit = match (edit, healed) {
            (Some(edit), _) => edit,
            (None, Some(envelope)) => Edit {
                envelope,
                append: Vec::new(),
                deliveries: Vec::new(),
            },
            (None, None) => return Ok(out),
        };
        for delivery in &edit.deliveries {
            self.enqueue(delivery)?;
        }
        self.write_locked(thread, &current, &copies, &edit)?;
        Ok(out)
    }

    /// Reads the envelopes of every thread in `states` (and the archive when asked). Files that
    /// do not parse are returned as errors beside the good ones.
    pub fn list(
        &self,
        states: &[State],
        archive: bool,
    ) -> (Vec<(Envelope, Location, PathBuf)>, Vec<StoreError>) {
        if let Some(db) = &self.database {
            return self.list_database(db, states, archive);
        }
        let mut out: Vec<(Envelope, Location, PathBuf)> = Vec::new();
        let mut errors = Vec::new();
        let mut seen: std::collections::HashMap<ThreadRef, usize> =
            std::collections::HashMap::new();
        for (location, path) in self.files(states, archive, &mut errors) {
            let checked = match read_envelope_checked(&path) {
                Ok(Some((_, fresh))) if fresh != Freshness::Current => {
                    let healed = layout::ref_of_file(
                        &path.file_name().unwrap_or_default().to_string_lossy(),
                    )
                    .map(|thread| self.heal(&thread));
                    match healed {
                        Some(Ok(t)) => Ok(Some((t.envelope, t.location, t.path))),
                        Some(Err(e)) => Err(e),
                        None => Ok(None),
                    }
                }
                other => other.map(|o| o.map(|(env, _)| (env, location.clone(), path.clone()))),
            };
            match checked {
                Ok(Some((env, location, path))) => {
                    // After an interrupted move a thread has two copies; the move changed the
                    // status, so the copy updated last (then later in the lifecycle) is current.
                    match seen.get(&env.thread_ref) {
                        Some(&i) => {
                            if (env.updated, &location) > (out[i].0.updated, &out[i].1) {
                                out[i] = (env, location, path);
                            }
                        }
                        None => {
                            seen.insert(env.thread_ref.clone(), out.len());
                            out.push((env, location, path));
                        }
                    }
                }
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        (out, errors)
    }

    fn list_database(
        &self,
        db: &pg::Pg,
        states: &[State],
        archive: bool,
    ) -> (Vec<(Envelope, Location, PathBuf)>, Vec<StoreError>) {
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

    /// The thread files in `states` (and the archive), with their locations (in tier 1, the
    /// mirror's).
    pub fn files(
        &self,
        states: &[State],
        archive: bool,
        errors: &mut Vec<StoreError>,
    ) -> Vec<(Location, PathBuf)> {
        let mut dirs: Vec<(Location, PathBuf)> = states
            .iter()
            .map(|s| (Location::State(*s), self.layout.state_dir(*s)))
            .collect();
        if archive {
            let root = self.layout.archive_dir();
            if let Ok(entries) = fs::read_dir(&root) {
                let mut months: Vec<String> = entries
                    .flatten()
                    .filter(|e| e.path().is_dir())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                months.sort();
                for m in months {
                    let dir = root.join(&m);
                    dirs.push((Location::Archive(m), dir));
                }
            }
        }
        let mut out = Vec::new();
        for (location, dir) in dirs {
            let entries = match fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    errors.push(StoreError::io(&dir, e));
                    continue;
                }
            };
            let mut names: Vec<String> = entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| layout::ref_of_file(n).is_some())
                .collect();
            names.sort();
            out.extend(names.into_iter().map(|n| (location.clone(), dir.join(n))));
        }
        out
    }

    /// Takes the lock that serialises request creation by `sender` (taken before the refs and
    /// thread locks, never while holding them).
    pub fn lock_sender(&self, sender: &str) -> Result<SenderGuard, StoreError> {
        if let Some(db) = &self.database {
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
        if let Some(db) = &self.database {
            return db.remember(sender, entries);
        }
        index::put(&self.layout, sender, entries)
    }

    /// Looks up an index entry of `sender`.
    pub fn lookup(&self, sender: &str, key: IndexKey<'_>) -> Result<Option<ThreadRef>, StoreError> {
        if let Some(db) = &self.database {
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
        if let Some(db) = &self.database {
            return db.add_dependent(dependency, dependent);
        }
        index::add_dependent(&self.layout, dependency, dependent)
    }

    /// The threads that wait for `dependency`.
    pub fn dependents(&self, dependency: &ThreadRef) -> Result<Vec<ThreadRef>, StoreError> {
        if let Some(db) = &self.database {
            return db.dependents(dependency);
        }
        index::dependents(&self.layout, dependency)
    }
}

/// Whether a thread's envelope needs rebuilding from its messages, and the rebuilt envelope
/// if so: always after a hand edit of a file mess wrote, and for a file of another writer when
/// the replay disagrees with it. `None` also when the documents are not all MESS messages:
/// nothing is rewritten then, so nothing is lost.
fn replay_if_needed(t: &ThreadFile) -> Option<Envelope> {
    let fresh = t.freshness();
    if fresh == Freshness::Current {
        return None;
    }
    match t.replayed() {
        Ok(rebuilt) => (fresh == Freshness::Stale
            || crate::protocol::envelope::differs_in_state(&t.envelope, &rebuilt))
        .then_some(rebuilt),
        Err(e) => {
            if fresh == Freshness::Stale {
                tracing::warn!(
                    thread = %t.envelope.thread_ref,
                    error = %e,
                    "a thread file was edited by hand into something that is not MESS; left as it is (see mess fsck)"
                );
            }
            None
        }
    }
}

/// Reads just the first document of a thread file and parses the envelope; `None` if the file
/// vanished (moved by a concurrent writer).
pub fn read_envelope_file(path: &Path) -> Result<Option<Envelope>, StoreError> {
    Ok(read_envelope_checked(path)?.map(|(env, _)| env))
}

/// [`read_envelope_file`], also judging whether the envelope accounts for the messages after
/// it, from the file's length (one `fstat`): see [`Freshness`].
fn read_envelope_checked(path: &Path) -> Result<Option<(Envelope, Freshness)>, StoreError> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io(path, e)),
    };
    let not_utf8 = || StoreError::NotUtf8 {
        path: path.to_owned(),
    };
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    let (envelope_text, fresh) = loop {
        let n = file.read(&mut chunk).map_err(|e| StoreError::io(path, e))?;
        bytes.extend_from_slice(&chunk[..n]);
        if n == 0 {
            let text = std::str::from_utf8(&bytes).map_err(|_| not_utf8())?;
            let spans = yaml::split_documents(text);
            let tail = spans.get(1).map_or(text.len(), |s| s.start);
            let head = &text[..tail];
            break (
                spans
                    .first()
                    .map_or(text, |s| &text[s.start..s.end.min(tail)])
                    .to_owned(),
                thread::freshness(head, text.len() - tail),
            );
        }
        // Only whole lines are searched, so a marker is never judged on half a line.
        let Some(last_newline) = bytes.iter().rposition(|b| *b == b'\n') else {
            continue;
        };
        let text = std::str::from_utf8(&bytes[..=last_newline]).map_err(|_| not_utf8())?;
        let spans = yaml::split_documents(text);
        if spans.len() >= 2 {
            // The length of the open file, not of the path: a rename over it cannot mix two files.
            let len = file.metadata().map_err(|e| StoreError::io(path, e))?.len();
            let tail = spans[1].start;
            let after = usize::try_from(len)
                .unwrap_or(usize::MAX)
                .saturating_sub(tail);
            break (
                text[spans[0].start..spans[0].end].to_owned(),
                thread::freshness(&text[..tail], after),
            );
        }
    };
    let value = yaml::parse_document(&envelope_text, &Limits::DEFAULT)
        .map_err(|e| StoreError::malformed(path, e.into()))?;
    Envelope::from_value(value)
        .map(|env| Some((env, fresh)))
        .map_err(|e| StoreError::malformed(path, e))
}
