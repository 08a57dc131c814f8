//! Threads on files: each thread one MESSE-AF file in the `state=` folder of its status (or the
//! archive), written whole to a temp file in the target folder and renamed into place under
//! the thread's lock, moved by writing the new copy before removing the old, and healed when its
//! messages changed behind mess's back (a hand `cat >>`).

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::protocol::envelope::{Envelope, MessageDoc};
use crate::protocol::ids::ThreadRef;
use crate::protocol::status::State;
use crate::protocol::yaml;
use crate::store::Edit;
use crate::store::error::StoreError;
use crate::store::files::Files;
use crate::store::layout::{self, Location};
use crate::store::thread::{self, Freshness, ThreadFile};
use crate::store::{fsio, lock};

impl Files<'_> {
    /// Writes a new thread into the folder of its status; fails if the ref exists.
    pub(crate) fn create(
        &self,
        envelope: &Envelope,
        docs: &[MessageDoc],
    ) -> Result<PathBuf, StoreError> {
        let location = Location::State(envelope.status.state());
        let path = self.layout.thread_path(&location, &envelope.thread_ref);
        let text = thread::new_thread_text(envelope, docs);
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
        self.known.wrote(&path);
        self.changed(envelope);
        Ok(path)
    }

    /// Every copy of a thread's file (more than one only after an interrupted move), checked in
    /// lifecycle order so a concurrent forward move is never missed.
    pub(crate) fn find(&self, thread: &ThreadRef) -> Result<Vec<(Location, PathBuf)>, StoreError> {
        let mut found = Vec::new();
        let months = self.archive_months_for(thread)?;
        let locations = State::ALL
            .into_iter()
            .map(Location::State)
            .chain(months.into_iter().map(Location::Archive));
        for loc in locations {
            let dir = self.layout.dir(&loc);
            for suffix in self.suffixes(&loc) {
                let path = dir.join(format!("{}{suffix}", thread.as_str()));
                if path.is_file() {
                    found.push((loc.clone(), path));
                }
            }
        }
        Ok(found)
    }

    /// The suffixes a thread file may have at `location`. The home watch reports names in the
    /// `state=` folders only, so the archive is always looked at for both.
    fn suffixes(&self, location: &Location) -> &'static [&'static str] {
        match location {
            Location::State(_) => self.known.suffixes(),
            Location::Archive(_) => &layout::THREAD_SUFFIXES,
        }
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
    /// for the messages (a hand edit) is rebuilt and written back first (see [`Files::heal`]).
    pub(crate) fn read(&self, thread: &ThreadRef) -> Result<ThreadFile, StoreError> {
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
    pub(crate) fn read_copies(&self, thread: &ThreadRef) -> Result<Vec<ThreadFile>, StoreError> {
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
    pub(crate) fn envelope(&self, thread: &ThreadRef) -> Result<(Envelope, Location), StoreError> {
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
    pub(crate) fn heal(&self, thread: &ThreadRef) -> Result<ThreadFile, StoreError> {
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
    pub(crate) fn write_locked(
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
        self.known.wrote(&path);
        for copy in copies {
            if copy.path != path {
                fsio::remove_durable(&copy.path)?;
            }
        }
        self.changed(&edit.envelope);
        Ok((path, target))
    }

    /// Changes a thread under its lock (see [`crate::store::Store::modify`]): the write replaces
    /// the file atomically, moves it to the folder of its new status, and removes any stale
    /// copies; the deliveries of the edit are queued first.
    pub(crate) fn modify<T, E: From<StoreError>>(
        &self,
        thread: &ThreadRef,
        mut decide: impl FnMut(&ThreadFile) -> Result<(Option<Edit>, T), E>,
    ) -> Result<T, E> {
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
    pub(crate) fn list(
        &self,
        states: &[State],
        archive: bool,
    ) -> (Vec<(Envelope, Location, PathBuf)>, Vec<StoreError>) {
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

    /// The thread files in `states` (and the archive), with their locations (in tier 1, the
    /// mirror's).
    pub(crate) fn files(
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
pub(crate) fn read_envelope_file(path: &Path) -> Result<Option<Envelope>, StoreError> {
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
    thread::parse_envelope(path, &envelope_text).map(|env| Some((env, fresh)))
}
