//! `mess fsck` on files: checks every thread file and, with `--repair`, fixes what interrupted
//! writes and other writers can leave behind: torn last documents, stale envelopes, files in the
//! wrong folder, duplicate copies after an interrupted move, leftover temp files, and the
//! indexes; and the healing a long-running process does at start.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::protocol::envelope::{self, Envelope};
use crate::protocol::ids::ThreadRef;
use crate::protocol::status::State;
use crate::store::error::StoreError;
use crate::store::files::Files;
use crate::store::fsck::{Finding, FsckReport, IndexFacts, Loaded, gather, load};
use crate::store::index::{self, Key};
use crate::store::layout::{self, Location};
use crate::store::thread;
use crate::store::{fsio, lock, refs};

/// Thread files grouped by the ref their names carry (two or more for one ref: an interrupted
/// move, or two writers naming one thread).
fn copies_by_ref(files: Vec<(Location, PathBuf)>) -> BTreeMap<ThreadRef, Vec<(Location, PathBuf)>> {
    let mut by_ref: BTreeMap<ThreadRef, Vec<(Location, PathBuf)>> = BTreeMap::new();
    for (loc, path) in files {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Some(r) = layout::ref_of_file(&name) {
            by_ref.entry(r).or_default().push((loc, path));
        }
    }
    by_ref
}

impl Files<'_> {
    /// Checks every thread file (all four folders and the archive); repairs when `repair` is set.
    /// `progress` sees (done, total).
    pub(crate) fn fsck(
        &self,
        repair: bool,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<FsckReport, StoreError> {
        let mut report = FsckReport::default();
        let mut errors = Vec::new();
        let files = self.files(&State::ALL, true, &mut errors);
        if let Some(e) = errors.into_iter().next() {
            return Err(e);
        }
        report.files = files.len();
        let by_ref = copies_by_ref(files);
        report.threads = by_ref.len();
        let total = by_ref.len();
        let mut facts = IndexFacts::default();
        for (i, (thread, copies)) in by_ref.into_iter().enumerate() {
            progress(i, total);
            let _guard =
                lock::acquire(&self.layout().locks_dir(), &lock::thread_lock_name(&thread))?;
            self.check_thread(&thread, copies, repair, &mut report, &mut facts)?;
        }
        progress(total, total);
        // The index rebuild goes first: it replaces the index folders, temp files included.
        self.check_indexes(&facts, repair, &mut report)?;
        self.check_temp_files(repair, &mut report)?;
        self.check_ledger(&mut report);
        Ok(report)
    }

    fn check_thread(
        &self,
        thread: &ThreadRef,
        copies: Vec<(Location, PathBuf)>,
        repair: bool,
        report: &mut FsckReport,
        facts: &mut IndexFacts,
    ) -> Result<(), StoreError> {
        // Load every copy as far as it parses: messages, and the envelope if it reads.
        let mut loaded = Vec::new();
        for (location, path) in copies {
            let Some(text) = fsio::read_optional(&path)? else {
                continue;
            };
            match load(&path, &text) {
                Ok(l) => loaded.push((location, path, text, l)),
                Err(problem) => report.note(&path, problem, false),
            }
        }
        if loaded.is_empty() {
            return Ok(());
        }
        loaded.sort_by_key(|l| std::cmp::Reverse(l.3.messages.len()));
        let (location, path, text, mut best) = loaded.remove(0);

        self.drop_other_copies(thread, (&path, &text, &best), &loaded, repair, report)?;

        let mut rewrite = false;
        if let Some(why) = &best.invalid_last {
            report.note(
                &path,
                format!("the last document is not a MESS message ({why}); kept as it is"),
                false,
            );
        }
        if let Some(torn) = &best.torn {
            report.note(&path, format!("torn last document ({torn})"), repair);
            if repair {
                self.quarantine(thread, &text[best.kept_len..])?;
            }
            rewrite = true;
        }

        let Some(envelope) = checked_envelope(thread, &path, &best, repair, report, &mut rewrite)
        else {
            return Ok(());
        };

        let expected = match &location {
            Location::Archive(_)
                if matches!(envelope.status.state(), State::Finished | State::Canceled) =>
            {
                location.clone()
            }
            _ => Location::State(envelope.status.state()),
        };
        if expected != location {
            report.note(
                &path,
                format!(
                    "{} thread is in {location}, expected {expected}",
                    envelope.status
                ),
                repair,
            );
            rewrite = true;
        }

        if rewrite && repair {
            let rest = &text[best.rest_start..best.kept_len];
            let new_text = thread::compose_text(&envelope, rest, &[]);
            let target = self.layout().thread_path(&expected, thread);
            fsio::ensure_dir(&self.layout().dir(&expected))?;
            fsio::write_atomic(&target, new_text.as_bytes())?;
            if target != path {
                fsio::remove_durable(&path)?;
            }
        }
        if let Some(why) = envelope.unroutable() {
            report.note(&path, format!("pending and not routed: {why}"), false);
        }
        best.envelope = Some(envelope);
        gather(thread, &best, facts);
        Ok(())
    }

    /// Removes the copies of `thread` other than the best (after an interrupted move, or two
    /// writers naming the thread with each suffix), quarantining what the best lacks.
    fn drop_other_copies(
        &self,
        thread: &ThreadRef,
        (path, text, best): (&Path, &str, &Loaded),
        others: &[(Location, PathBuf, String, Loaded)],
        repair: bool,
        report: &mut FsckReport,
    ) -> Result<(), StoreError> {
        for (_, other_path, other_text, other) in others {
            let prefix = best
                .message_text(text)
                .starts_with(other.message_text(other_text));
            let problem = if other_path.parent() == path.parent() {
                // MESSE-AF allows both suffixes, so two writers can each have named the thread.
                format!(
                    "second file for {thread} in the same folder (`.messe-af` and `.messe-af.yaml`); the copy at {} has more messages{}",
                    path.display(),
                    if prefix {
                        ""
                    } else {
                        " (the other's differing documents go to .mess/quarantine/)"
                    }
                )
            } else {
                format!(
                    "duplicate copy of {thread} (an interrupted move); the copy at {} is newer",
                    path.display()
                )
            };
            if repair {
                if !prefix {
                    self.quarantine(thread, other_text)?;
                }
                fsio::remove_durable(other_path)?;
            }
            report.note(other_path, problem, repair);
        }

        Ok(())
    }

    fn quarantine(&self, thread: &ThreadRef, bytes: &str) -> Result<(), StoreError> {
        let dir = self.layout().quarantine_dir();
        fsio::ensure_dir(&dir)?;
        let mut n = 1;
        loop {
            let path = dir.join(format!("{thread}.{n}.yaml"));
            match fsio::create_atomic(&path, bytes.as_bytes()) {
                Ok(()) => return Ok(()),
                Err(StoreError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::AlreadyExists =>
                {
                    n += 1
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Finishes what writers that died left behind (`mess serve` and `mess mcp` do this at
    /// start, so `mess fsck` is clean after a crash and a restart): the temp files of
    /// interrupted writes, and the older copy of a thread whose move to another folder was
    /// interrupted (each such thread is checked and repaired as `fsck --repair` would, under
    /// its lock, so a move in progress is never mistaken for one interrupted). Returns what
    /// it repaired. `moves` says whether the threads are the files' own (a mirror's are
    /// rewritten from the database, so only its temp files are looked at).
    pub(crate) fn heal_interrupted_writes(&self, moves: bool) -> Result<Vec<Finding>, StoreError> {
        let mut report = FsckReport::default();
        if moves {
            let mut errors = Vec::new();
            let by_ref = copies_by_ref(self.files(&State::ALL, true, &mut errors));
            let mut facts = IndexFacts::default();
            for (thread, copies) in by_ref.into_iter().filter(|(_, c)| c.len() > 1) {
                let _guard =
                    lock::acquire(&self.layout().locks_dir(), &lock::thread_lock_name(&thread))?;
                // Listed before the lock: a writer may have finished its move meanwhile.
                let copies: Vec<_> = copies.into_iter().filter(|(_, p)| p.exists()).collect();
                if copies.len() > 1 {
                    self.check_thread(&thread, copies, true, &mut report, &mut facts)?;
                }
            }
        }
        self.check_temp_files(true, &mut report)?;
        Ok(report.findings.into_iter().filter(|f| f.repaired).collect())
    }

    /// Temp files left by writers that died between write and rename, anywhere in the home
    /// (thread folders, the archive, indexes, registrations, the outbox, mailboxes).
    fn check_temp_files(&self, repair: bool, report: &mut FsckReport) -> Result<(), StoreError> {
        let layout = self.layout();
        let locks = layout.locks_dir();
        let mut dirs = vec![layout.root().to_owned()];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_dir() {
                    if path != locks {
                        dirs.push(path);
                    }
                    continue;
                }
                let name = entry.file_name().to_string_lossy().into_owned();
                if !(name.starts_with('.') && name.contains(fsio::TEMP_MARK)) {
                    continue;
                }
                // A temp file with a live writer is work in progress, not a problem. A thread's
                // temp file is judged, and removed, under the thread's lock.
                let Some(_held) = self.temp_is_abandoned(&name, &entry)? else {
                    continue;
                };
                if repair {
                    fsio::remove_durable(&path)?;
                }
                report.note(&path, "leftover temp file of an interrupted write", repair);
            }
        }
        Ok(())
    }

    /// Whether a temp file was abandoned by its writer; `Some` holds what keeps it so while
    /// it is removed. A thread's temp file is written under the thread's lock, so when that
    /// lock is free its writer is gone (and stays away while the lock is held). Other temp
    /// files are abandoned once a minute old, or ten seconds old when the process named in
    /// their name no longer runs (a writer in another process namespace may look gone, so
    /// the name alone never decides).
    fn temp_is_abandoned(
        &self,
        name: &str,
        entry: &fs::DirEntry,
    ) -> Result<Option<Option<lock::Lock>>, StoreError> {
        let thread = name
            .strip_prefix('.')
            .and_then(|n| n.split(fsio::TEMP_MARK).next())
            .and_then(layout::ref_of_file);
        if let Some(thread) = thread {
            return Ok(lock::try_acquire(
                &self.layout().locks_dir(),
                &lock::thread_lock_name(&thread),
            )?
            .map(Some));
        }
        let age = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .unwrap_or_default();
        let writer_gone = name
            .split(fsio::TEMP_MARK)
            .nth(1)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
            .is_some_and(|pid| {
                pid != std::process::id()
                    && Path::new("/proc/self").exists()
                    && !Path::new("/proc").join(pid.to_string()).exists()
            });
        let abandoned = age.as_secs() >= 60 || (writer_gone && age.as_secs() >= 10);
        Ok(abandoned.then_some(None))
    }

    fn check_indexes(
        &self,
        facts: &IndexFacts,
        repair: bool,
        report: &mut FsckReport,
    ) -> Result<(), StoreError> {
        let layout = self.layout();
        for (date, serial) in &facts.serials {
            let counter = layout.refs_dir().join(date.format("%Y-%m-%d").to_string());
            let stored = fsio::read_optional(&counter)?.and_then(|t| t.trim().parse::<u64>().ok());
            if stored.is_some_and(|s| s < *serial) {
                if repair {
                    refs::ensure_at_least(layout, *date, *serial)?;
                }
                report.note(
                    &counter,
                    format!("ref counter behind the files (serial {serial} exists)"),
                    repair,
                );
            }
        }
        // Merge, never clear: writers keep adding entries while this runs. Each sender's
        // entries are judged under that sender's creation lock, and an entry that names a newer
        // thread that exists is right even if the scan above missed that thread.
        let exists = |r: &ThreadRef| -> Result<bool, StoreError> { Ok(!self.find(r)?.is_empty()) };
        let order = |r: &ThreadRef| (r.date_serial(), r.clone());
        let mut wanted: BTreeMap<&str, Vec<(Key<'_>, &ThreadRef)>> = BTreeMap::new();
        for ((sender, id), (_, thread)) in &facts.client_ids {
            wanted
                .entry(sender)
                .or_default()
                .push((Key::ClientId(id), thread));
        }
        for (sender, (_, thread)) in &facts.last {
            wanted.entry(sender).or_default().push((Key::Last, thread));
        }
        // A suggestion about several threads is recorded in each; its entry names one of them.
        let mut holders: BTreeMap<(&str, &str), Vec<&ThreadRef>> = BTreeMap::new();
        for (sender, id, thread) in &facts.suggestions {
            let held = holders.entry((sender, id)).or_default();
            if held.is_empty() {
                wanted
                    .entry(sender)
                    .or_default()
                    .push((Key::Suggestion(id), thread));
            }
            held.push(thread);
        }
        let mut stale = 0;
        for (sender, entries) in wanted {
            let _guard = lock::acquire(&layout.locks_dir(), &lock::sender_lock_name(sender))?;
            for (key, thread) in entries {
                let current = index::get(layout, sender, key)?;
                let fine = match &current {
                    Some(c) if c == thread => true,
                    Some(c) if matches!(key, Key::Suggestion(id) if holders.get(&(sender, id)).is_some_and(|h| h.contains(&c))) => {
                        true
                    }
                    Some(c) => exists(c)? && order(c) > order(thread),
                    None => false,
                };
                if !fine {
                    stale += 1;
                    if repair {
                        index::put_exact(layout, sender, key, thread)?;
                    }
                }
            }
        }
        for (dep, dependent) in &facts.deps {
            let Ok(dep) = ThreadRef::parse(dep) else {
                continue;
            };
            if !index::dependents(layout, &dep)?.contains(dependent) {
                stale += 1;
                if repair {
                    index::add_dependent(layout, &dep, dependent)?;
                }
            }
        }
        if stale > 0 {
            report.note(
                &layout.index_dir(),
                format!("{stale} index entries (client ids, `last`, suggestions, dependencies) missing or stale"),
                repair,
            );
        }
        Ok(())
    }
}

/// The envelope `best` should have: the stored one when its messages agree, else rebuilt from
/// them, with the file's own ref; `None` when there is neither. Notes each difference and sets
/// `rewrite` when the file needs writing again.
fn checked_envelope(
    thread: &ThreadRef,
    path: &Path,
    best: &Loaded,
    repair: bool,
    report: &mut FsckReport,
    rewrite: &mut bool,
) -> Option<Envelope> {
    let rebuilt = match envelope::rebuild(thread, best.envelope.as_ref(), &best.messages) {
        Ok(e) => Some(e),
        Err(e) => {
            if best.envelope.is_none() {
                report.note(
                    path,
                    format!("envelope unreadable and cannot be rebuilt: {e}"),
                    false,
                );
                return None;
            }
            None
        }
    };
    let mut envelope = match (&best.envelope, rebuilt) {
        (Some(stored), Some(rebuilt)) => {
            if let Some(difference) = envelope::state_difference(stored, &rebuilt) {
                report.note(
                    path,
                    format!("envelope out of date with its messages ({difference})"),
                    repair,
                );
                *rewrite = true;
                rebuilt
            } else {
                stored.clone()
            }
        }
        (None, Some(rebuilt)) => {
            report.note(
                path,
                "envelope unreadable; rebuilt from the messages",
                repair,
            );
            *rewrite = true;
            rebuilt
        }
        (Some(stored), None) => stored.clone(),
        (None, None) => return None,
    };
    if envelope.thread_ref != *thread {
        report.note(
            path,
            format!(
                "envelope names ref {} but the file is {thread}",
                envelope.thread_ref
            ),
            repair,
        );
        envelope.thread_ref = thread.clone();
        *rewrite = true;
    }

    Some(envelope)
}
