//! Agent mail on files (tier 0): `<home>/.mail/<mailbox>/`, `read/`, `archive/`, and readers'
//! records of `__broadcast` in `read/<reader>/`. Exclusive creation and hard links make each
//! claim one reader's, with no lock.

use std::path::{Path, PathBuf};

use crate::mail::{
    BROADCAST, Folder, Found, Letter, Mail, MailError, check_file, check_name, stale,
};
use crate::protocol::time::Timestamp;
use crate::store::error::StoreError;
use crate::store::fsio;
use crate::store::postgres::mail::MailRow;

/// A message file as [`Mail::load`] found it.
enum Loaded {
    /// Current: here is the message.
    Live(Box<Letter>),
    /// Not there (claimed or deleted meanwhile).
    Gone,
    /// Stale, and now deleted.
    Pruned,
}

impl Mail {
    fn dir(&self, mailbox: &str, folder: Folder) -> PathBuf {
        let base = self.root.join(mailbox);
        match folder {
            Folder::Unread => base,
            Folder::Read => base.join("read"),
            Folder::Archive => base.join("archive"),
        }
    }

    /// Creates the unread message `file` of `letter` with `text`, unless a message of that
    /// name is in any folder of the mailbox; whether it did.
    pub(super) fn send_file(
        &self,
        letter: &Letter,
        file: &str,
        text: &str,
    ) -> Result<bool, MailError> {
        let dir = self.dir(&letter.to, Folder::Unread);
        fsio::ensure_dir(&dir)?;
        if Folder::ALL
            .iter()
            .any(|f| self.dir(&letter.to, *f).join(file).exists())
        {
            return Ok(false);
        }
        match fsio::create_atomic(&dir.join(file), text.as_bytes()) {
            Ok(()) => Ok(true),
            Err(StoreError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::AlreadyExists =>
            {
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// How many unread messages from `from` wait in `mailbox`, counted by file name (senders
    /// hold no underscore, so `_<from>_` or `_<from>-<n>_` names the sender).
    pub(super) fn unread_from_file(&self, mailbox: &str, from: &str) -> Result<usize, MailError> {
        check_name("mailbox", mailbox)?;
        let Ok(entries) = std::fs::read_dir(self.dir(mailbox, Folder::Unread)) else {
            return Ok(0);
        };
        let exact = format!("_{from}_");
        let numbered = format!("_{from}-");
        Ok(entries
            .flatten()
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.ends_with(".md") && (name.contains(&exact) || name.contains(&numbered))
            })
            .count())
    }

    /// Where `reader`'s record of reading `__broadcast` messages is: `__broadcast/read/<reader>/`.
    fn reader_dir(&self, reader: &str) -> Result<PathBuf, MailError> {
        check_name("reader", reader)?;
        Ok(self.dir(BROADCAST, Folder::Read).join(reader))
    }

    /// The folder that holds `mailbox`'s messages in `folder` for `reader`: a `__broadcast`
    /// message `reader` has read is in its own record, every other one in the mailbox's folder.
    fn folder_for(
        &self,
        mailbox: &str,
        folder: Folder,
        reader: Option<&str>,
    ) -> Result<PathBuf, MailError> {
        match reader {
            Some(reader) if mailbox == BROADCAST && folder == Folder::Read => {
                self.reader_dir(reader)
            }
            _ => Ok(self.dir(mailbox, folder)),
        }
    }

    /// The message file names in `dir`, sorted (oldest first).
    fn names(dir: &Path) -> Result<Vec<String>, MailError> {
        let mut names: Vec<String> = match std::fs::read_dir(dir) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| check_file(n).is_ok())
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(StoreError::io(dir, e).into()),
        };
        names.sort();
        Ok(names)
    }

    /// Reads the message at `path` as found in `folder` at `now`, deleting it when it is stale.
    fn load(path: &Path, folder: Folder, now: Timestamp) -> Result<Loaded, MailError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Loaded::Gone),
            Err(e) => return Err(StoreError::io(path, e).into()),
        };
        let letter = Letter::from_text(&text)?;
        if stale(&letter, folder, now) {
            // Not synced: a deletion a crash undoes is done again at the next read, and a
            // folder sync per message made pruning a thousand messages take seconds.
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io(path, e).into()),
            }
            return Ok(Loaded::Pruned);
        }
        Ok(Loaded::Live(Box::new(letter)))
    }

    /// The messages of `mailbox` in `folder` as `reader` sees them at `now`, oldest first, with
    /// the files that could not be read (named, not fatal). In `__broadcast`, unread means not
    /// yet read by `reader`, and read means read by `reader` (without a reader: every message,
    /// and `read/` itself). Expired messages and archive older than `ARCHIVE_KEEP_DAYS` are
    /// deleted instead of listed.
    pub(super) fn list_file(
        &self,
        mailbox: &str,
        folder: Folder,
        reader: Option<&str>,
        now: Timestamp,
    ) -> Result<(Vec<Found>, Vec<String>), MailError> {
        check_name("mailbox", mailbox)?;
        let dir = self.folder_for(mailbox, folder, reader)?;
        let mut names = Mail::names(&dir)?;
        if let Some(reader) = reader
            && mailbox == BROADCAST
            && folder == Folder::Unread
        {
            let seen = Mail::names(&self.reader_dir(reader)?)?;
            names.retain(|n| seen.binary_search(n).is_err());
        }
        let mut found = Vec::new();
        let mut problems = Vec::new();
        for file in names {
            match Mail::load(&dir.join(&file), folder, now) {
                Ok(Loaded::Live(letter)) => found.push(Found {
                    mailbox: mailbox.to_owned(),
                    folder,
                    file,
                    letter: *letter,
                }),
                Ok(Loaded::Gone | Loaded::Pruned) => {}
                Err(e) => problems.push(format!("{mailbox}/{file}: {e}")),
            }
        }
        Ok((found, problems))
    }

    /// Finds `file` in `mailbox` for `reader` at `now`, in whichever folder it is (a
    /// `__broadcast` message `reader` has read is in `read`); an expired message is not found.
    pub(super) fn read_file(
        &self,
        mailbox: &str,
        file: &str,
        reader: Option<&str>,
        now: Timestamp,
    ) -> Result<Found, MailError> {
        check_name("mailbox", mailbox)?;
        check_file(file)?;
        let order = if mailbox == BROADCAST {
            [Folder::Read, Folder::Unread, Folder::Archive]
        } else {
            Folder::ALL
        };
        for folder in order {
            let path = self.folder_for(mailbox, folder, reader)?.join(file);
            if let Loaded::Live(letter) = Mail::load(&path, folder, now)? {
                return Ok(Found {
                    mailbox: mailbox.to_owned(),
                    folder,
                    file: file.to_owned(),
                    letter: *letter,
                });
            }
        }
        Err(MailError::NotFound {
            message: format!("no message {file} in mailbox {mailbox}"),
        })
    }

    /// Marks an unread message read by `reader`. In a session or tag mailbox that is the claim:
    /// the message moves into `read/` (of several readers exactly one succeeds; the others get
    /// [`MailError::Claimed`]) and records `read_at`. A `__broadcast` message stays unread for
    /// every other session: `reader` gets its own copy with `read_at` in `read/<reader>/`,
    /// created exclusively, so reading it twice is refused the same way.
    pub(super) fn mark_read_file(
        &self,
        mailbox: &str,
        file: &str,
        reader: &str,
        now: Timestamp,
    ) -> Result<Found, MailError> {
        check_name("mailbox", mailbox)?;
        check_file(file)?;
        let records = if mailbox == BROADCAST {
            Some(self.reader_dir(reader)?)
        } else {
            None
        };
        let from = self.dir(mailbox, Folder::Unread).join(file);
        let Loaded::Live(letter) = Mail::load(&from, Folder::Unread, now)? else {
            return Err(self.not_unread(mailbox, file, Some(reader), now));
        };
        let mut letter = *letter;
        if let Some(dir) = records {
            fsio::ensure_dir(&dir)?;
            letter.read_at = Some(now);
            return match fsio::create_atomic(&dir.join(file), letter.to_text().as_bytes()) {
                Ok(()) => Ok(Found {
                    mailbox: mailbox.to_owned(),
                    folder: Folder::Read,
                    file: file.to_owned(),
                    letter,
                }),
                Err(StoreError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::AlreadyExists =>
                {
                    Err(MailError::Claimed {
                        message: format!("{mailbox}/{file} was already read by {reader}"),
                    })
                }
                Err(e) => Err(e.into()),
            };
        }
        let to_dir = self.dir(mailbox, Folder::Read);
        fsio::ensure_dir(&to_dir)?;
        let to = to_dir.join(file);
        // The link is the claim: it fails for every reader after the first (a rename would
        // replace), and the unread copy goes once the link holds.
        match std::fs::hard_link(&from, &to) {
            Ok(()) => {
                if let Err(e) = std::fs::remove_file(&from)
                    && e.kind() != std::io::ErrorKind::NotFound
                {
                    return Err(StoreError::io(&from, e).into());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // An unread copy beside a read one is what a crash between the link and the
                // unlink leaves: the claim stands, the copy goes.
                let _ = fsio::remove_durable(&from);
                return Err(MailError::Claimed {
                    message: format!("{mailbox}/{file} was already read"),
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(self.not_unread(mailbox, file, Some(reader), now));
            }
            Err(e) => return Err(StoreError::io(&from, e).into()),
        }
        fsio::sync_parent(&from)?;
        fsio::sync_parent(&to)?;
        letter.read_at = Some(now);
        fsio::write_atomic(&to, letter.to_text().as_bytes())?;
        Ok(Found {
            mailbox: mailbox.to_owned(),
            folder: Folder::Read,
            file: file.to_owned(),
            letter,
        })
    }

    /// Deletes, in every mailbox and folder (readers' `__broadcast` records included), the
    /// messages whose `expires` has come and the archive older than `ARCHIVE_KEEP_DAYS`;
    /// returns how many went. Files that cannot be read are left for a person to look at.
    pub(super) fn prune_file(&self, now: Timestamp) -> Result<usize, MailError> {
        let mut pruned = 0;
        for mailbox in Mail::subdirs(&self.root)? {
            let base = self.root.join(&mailbox);
            let mut folders = vec![
                (base.clone(), Folder::Unread),
                (base.join("read"), Folder::Read),
                (base.join("archive"), Folder::Archive),
            ];
            for reader in Mail::subdirs(&base.join("read"))? {
                folders.push((base.join("read").join(reader), Folder::Read));
            }
            for (dir, folder) in folders {
                for file in Mail::names(&dir)? {
                    if let Ok(Loaded::Pruned) = Mail::load(&dir.join(&file), folder, now) {
                        pruned += 1;
                    }
                }
            }
        }
        Ok(pruned)
    }

    /// The names of the folders in `dir` that could be mailboxes (or readers).
    fn subdirs(dir: &Path) -> Result<Vec<String>, MailError> {
        match std::fs::read_dir(dir) {
            Ok(entries) => Ok(entries
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| check_name("mailbox", n).is_ok())
                .collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(StoreError::io(dir, e).into()),
        }
    }

    /// Moves a message (unread or read) into `archive/`.
    pub(super) fn archive_file(&self, mailbox: &str, file: &str) -> Result<(), MailError> {
        check_name("mailbox", mailbox)?;
        check_file(file)?;
        let to_dir = self.dir(mailbox, Folder::Archive);
        fsio::ensure_dir(&to_dir)?;
        if to_dir.join(file).exists() {
            return Ok(());
        }
        for folder in [Folder::Read, Folder::Unread] {
            let from = self.dir(mailbox, folder).join(file);
            // Linked, never renamed over: an archived message is never replaced.
            match std::fs::hard_link(&from, to_dir.join(file)) {
                Ok(()) => {
                    fsio::sync_dir(&to_dir)?;
                    fsio::remove_durable(&from)?;
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
                Err(e) => return Err(StoreError::io(&from, e).into()),
            }
        }
        Err(MailError::NotFound {
            message: format!("no message {file} in mailbox {mailbox}"),
        })
    }
}

impl Mail {
    /// Every message and `__broadcast` record on file, by mailbox, for copying into a database;
    /// files that cannot be read are named in the second list.
    pub(super) fn rows_file(&self) -> Result<(Vec<MailRow>, Vec<String>), MailError> {
        let mut rows = Vec::new();
        let mut problems = Vec::new();
        for mailbox in Mail::subdirs(&self.root)? {
            let mut places: Vec<(Folder, Option<String>)> =
                Folder::ALL.iter().map(|f| (*f, None)).collect();
            for reader in Mail::subdirs(&self.dir(&mailbox, Folder::Read))? {
                places.push((Folder::Read, Some(reader)));
            }
            for (folder, reader) in places {
                let dir = match &reader {
                    Some(reader) => self.dir(&mailbox, Folder::Read).join(reader),
                    None => self.dir(&mailbox, folder),
                };
                for file in Mail::names(&dir)? {
                    let path = dir.join(&file);
                    let text = match std::fs::read_to_string(&path) {
                        Ok(text) => text,
                        Err(e) => {
                            problems.push(format!("{}: {e}", path.display()));
                            continue;
                        }
                    };
                    match Letter::from_text(&text) {
                        Ok(letter) => rows.push(MailRow {
                            mailbox: mailbox.clone(),
                            file,
                            folder: folder.as_str().to_owned(),
                            reader: reader.clone(),
                            sender: letter.from,
                            doc: text,
                            written: letter.timestamp.timestamp(),
                            expires: letter.expires.map(|t| t.timestamp()),
                        }),
                        Err(e) => problems.push(format!("{}: {e}", path.display())),
                    }
                }
            }
        }
        Ok((rows, problems))
    }

    /// Writes `row` as its file, exactly its text, unless that file is there; whether it was.
    pub(super) fn put_file(&self, row: &MailRow) -> Result<bool, MailError> {
        let path = self.path_of(row)?;
        fsio::ensure_dir(path.parent().unwrap_or(&self.root))?;
        match fsio::create_atomic(&path, row.doc.as_bytes()) {
            Ok(()) => Ok(true),
            Err(StoreError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::AlreadyExists =>
            {
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }
}

impl Mail {
    /// Where `row` is on file, its names checked.
    fn path_of(&self, row: &MailRow) -> Result<PathBuf, MailError> {
        check_name("mailbox", &row.mailbox)?;
        check_file(&row.file)?;
        let folder = Folder::parse(&row.folder)?;
        let dir = match &row.reader {
            Some(reader) => {
                check_name("reader", reader)?;
                self.dir(&row.mailbox, Folder::Read).join(reader)
            }
            None => self.dir(&row.mailbox, folder),
        };
        Ok(dir.join(&row.file))
    }

    /// Makes the files under `.mail/` exactly `rows` (a node's read-only mirror of the
    /// database's mail): writes what differs, removes what is not in `rows`; returns how many
    /// files changed. Not synced: the mirror is rebuilt from the database after a crash.
    pub(super) fn mirror_file(&self, rows: &[MailRow]) -> Result<usize, MailError> {
        let mut keep = std::collections::HashSet::new();
        let mut changed = 0;
        for row in rows {
            let Ok(path) = self.path_of(row) else {
                continue;
            };
            if fsio::read_optional(&path)?.as_deref() != Some(row.doc.as_str()) {
                fsio::ensure_dir(path.parent().unwrap_or(&self.root))?;
                fsio::replace_unsynced(&path, row.doc.as_bytes())?;
                changed += 1;
            }
            keep.insert(path);
        }
        let mut stack = vec![self.root.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                match entry.file_type() {
                    Ok(t) if t.is_dir() => stack.push(path),
                    Ok(_) if !keep.contains(&path) => match std::fs::remove_file(&path) {
                        Ok(()) => changed += 1,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(StoreError::io(&path, e).into()),
                    },
                    _ => {}
                }
            }
        }
        Ok(changed)
    }
}
