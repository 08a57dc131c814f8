//! Agent mail (the agent mail format): Markdown files with YAML frontmatter in mailboxes
//! under `<home>/.mail/<mailbox>/` (unread), `read/` and `archive/`; a message is claimed by
//! renaming it into `read/`, so of several readers of a shared (tag) mailbox exactly one gets
//! it. `__broadcast` is for every session, so reading one of its messages records that reader
//! only (`read/<reader>/`). Expired messages and old archive are deleted, and never served.
//! In tier 1 the same mailboxes are rows of the database (`store::postgres::mail`), mirrored read-only
//! into each node's `.mail/`. Synchronous, and knows nothing of threads, queries or
//! notifications.

#[cfg(test)]
mod tests;

mod files;

use std::path::{Path, PathBuf};

use crate::protocol::emit;
use crate::protocol::time::{self, Timestamp};
use crate::protocol::value::{Map, Value};
use crate::protocol::yaml::{self, Limits};
use crate::store::error::StoreError;
use crate::store::postgres::Pg;
use crate::store::postgres::mail::MailRow;

/// The mailbox every session reads besides its own.
pub(crate) const BROADCAST: &str = "__broadcast";

/// The message types the format names: its table's seven and `announcement`, which its
/// `__broadcast` example uses. Other types are kept too (the format means them to be
/// extensible), as long as they are a safe token ([`check_type`]).
pub(crate) const TYPES: [&str; 8] = [
    "status",
    "alert",
    "task",
    "question",
    "response",
    "report",
    "handoff",
    "announcement",
];

/// How long an archived message is kept, counted from its `timestamp`: the format's archive is
/// "old messages, may be pruned", and after this many days they are.
pub(crate) const ARCHIVE_KEEP_DAYS: i64 = 90;

/// Longest message type.
const MAX_TYPE_LEN: usize = 32;

/// Where a message is in its mailbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Folder {
    /// The mailbox itself: not read yet.
    Unread,
    /// `read/`: claimed by a reader.
    Read,
    /// `archive/`: kept for reference.
    Archive,
}

impl Folder {
    /// The folder's name (`unread`, `read`, `archive`).
    pub fn as_str(self) -> &'static str {
        match self {
            Folder::Unread => "unread",
            Folder::Read => "read",
            Folder::Archive => "archive",
        }
    }

    /// Reads a folder name.
    pub fn parse(s: &str) -> Result<Folder, MailError> {
        match s {
            "unread" | "" => Ok(Folder::Unread),
            "read" => Ok(Folder::Read),
            "archive" => Ok(Folder::Archive),
            other => Err(MailError::Invalid {
                message: format!("folder {other:?} is not one of unread, read, archive"),
            }),
        }
    }

    /// Every folder.
    pub const ALL: [Folder; 3] = [Folder::Unread, Folder::Read, Folder::Archive];
}

/// One message: the frontmatter fields and the Markdown body.
#[derive(Debug, Clone, PartialEq)]
pub struct Letter {
    /// The sender.
    pub from: String,
    /// The recipient: a session name, a tag, or `__broadcast`.
    pub to: String,
    /// One of [`TYPES`], or another safe token ([`check_type`]).
    pub kind: String,
    /// When it was written.
    pub timestamp: Timestamp,
    /// Whether the sender expects a reply.
    pub needs_response: bool,
    /// `urgent`, `normal` or `low`.
    pub priority: String,
    /// Tags for filtering.
    pub tags: Vec<String>,
    /// The file name of the message this answers.
    pub in_reply_to: Option<String>,
    /// Groups a conversation.
    pub thread_id: Option<String>,
    /// When it may be deleted.
    pub expires: Option<Timestamp>,
    /// When its reader read it.
    pub read_at: Option<Timestamp>,
    /// The Markdown body.
    pub body: String,
}

/// A message as found in a mailbox.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The mailbox.
    pub mailbox: String,
    /// Its folder there.
    pub folder: Folder,
    /// Its file name.
    pub file: String,
    /// The message.
    pub letter: Letter,
}

/// What can go wrong with mail.
#[derive(Debug, thiserror::Error)]
pub enum MailError {
    /// A bad name, type or field.
    #[error("{message}")]
    Invalid {
        /// What is wrong.
        message: String,
    },
    /// No such message.
    #[error("{message}")]
    NotFound {
        /// What was looked for.
        message: String,
    },
    /// Another reader claimed the message first.
    #[error("{message}")]
    Claimed {
        /// Which message.
        message: String,
    },
    /// A file problem.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn invalid(message: impl Into<String>) -> MailError {
    MailError::Invalid {
        message: message.into(),
    }
}

/// Whether `name` is usable as a mailbox or sender name (also in file names).
fn check_name(what: &str, name: &str) -> Result<(), MailError> {
    // A sender's name sits between underscores in file names, so it has none itself.
    if what == "from" && name.contains('_') {
        return Err(invalid(format!(
            "from {name:?} contains '_', which separates the parts of mail file names"
        )));
    }
    let ok = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name != "read"
        && name != "archive"
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "{what} {name:?} is not a usable mailbox name (letters, digits, '-', '_', '.'; not read or archive)"
        )))
    }
}

/// Checks a message type: one of [`TYPES`] or another lower-case token (a letter, then letters,
/// digits and '-', at most 32), since it becomes the last part of the file name.
pub(crate) fn check_type(kind: &str) -> Result<(), MailError> {
    let ok = kind.len() <= MAX_TYPE_LEN
        && kind.starts_with(|c: char| c.is_ascii_lowercase())
        && kind
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "type {kind:?} is not a usable message type (a lower-case letter, then letters, digits or '-', at most {MAX_TYPE_LEN}; the format's are {})",
            TYPES.join(", ")
        )))
    }
}

/// Checks a mailbox name (a session name, a tag or `__broadcast`).
pub(crate) fn check_mailbox(name: &str) -> Result<(), MailError> {
    check_name("mailbox", name)
}

/// Reads when a message may be deleted: an RFC 3339 instant, or a duration from `now` (`7d`,
/// `2h`, `PT30M`); empty for none. It must lie ahead of `now`.
pub(crate) fn parse_expires(text: &str, now: Timestamp) -> Result<Option<Timestamp>, MailError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let at = match time::parse_timestamp(text) {
        Ok(t) => t,
        Err(as_time) => match time::parse_any_duration(text) {
            Ok(d) => now
                .checked_add_signed(d.length)
                .ok_or_else(|| invalid(format!("expires: {text:?} is too far ahead")))?,
            Err(_) => {
                return Err(invalid(format!(
                    "expires: {as_time}; give an RFC 3339 time or a duration from now (7d, 2h, PT30M)"
                )));
            }
        },
    };
    if at <= now {
        return Err(invalid(format!(
            "expires: {} is not in the future",
            time::format_timestamp(&at)
        )));
    }
    Ok(Some(at))
}

/// Whether `letter` may be deleted at `now`, as found in `folder`: its `expires` has come, or it
/// is archive older than [`ARCHIVE_KEEP_DAYS`].
fn stale(letter: &Letter, folder: Folder, now: Timestamp) -> bool {
    letter.expires.is_some_and(|t| t <= now)
        || (folder == Folder::Archive
            && letter.timestamp + chrono::TimeDelta::days(ARCHIVE_KEEP_DAYS) <= now)
}

/// Whether `file` is a message file name of the format (`20260128T153000Z_worker_status.md`,
/// with `-2`, `-3` ... before `.md` when a second message had the same name).
fn check_file(file: &str) -> Result<(), MailError> {
    let valid = file.ends_with(".md")
        && file.len() > 20
        && file.as_bytes()[..16]
            .iter()
            .enumerate()
            .all(|(i, b)| match i {
                8 => *b == b'T',
                15 => *b == b'Z',
                _ => b.is_ascii_digit(),
            })
        && file.as_bytes()[16] == b'_'
        && !file.contains('/')
        && !file.contains('\\')
        && !file.contains("..");
    if valid {
        Ok(())
    } else {
        Err(invalid(format!(
            "{file:?} is not a mail file name (YYYYMMDDTHHMMSSZ_from_type.md)"
        )))
    }
}

impl Letter {
    /// Checks the fields the format requires.
    pub fn check(&self) -> Result<(), MailError> {
        check_name("from", &self.from)?;
        check_name("to", &self.to)?;
        check_type(&self.kind)?;
        if !matches!(self.priority.as_str(), "urgent" | "normal" | "low") {
            return Err(invalid(format!(
                "priority {:?} is not one of urgent, normal, low",
                self.priority
            )));
        }
        if let Some(r) = &self.in_reply_to {
            check_file(r)?;
        }
        if let Some(at) = self.expires
            && at <= self.timestamp
        {
            return Err(invalid(format!(
                "expires: {} is not after the message's timestamp",
                time::format_timestamp(&at)
            )));
        }
        Ok(())
    }

    /// The file's text: frontmatter between `---` lines, a blank line, the body.
    pub fn to_text(&self) -> String {
        let mut m = Map::new();
        m.insert("from", Value::str(&self.from));
        m.insert("to", Value::str(&self.to));
        m.insert("type", Value::str(&self.kind));
        m.insert(
            "timestamp",
            Value::str(time::format_timestamp(&self.timestamp)),
        );
        m.insert("needs_response", Value::Bool(self.needs_response));
        m.insert("priority", Value::str(&self.priority));
        m.insert(
            "tags",
            Value::Seq(self.tags.iter().map(Value::str).collect()),
        );
        m.insert_opt("in_reply_to", self.in_reply_to.as_deref().map(Value::str));
        m.insert_opt("thread_id", self.thread_id.as_deref().map(Value::str));
        m.insert_opt(
            "expires",
            self.expires.map(|t| Value::str(time::format_timestamp(&t))),
        );
        m.insert_opt(
            "read_at",
            self.read_at.map(|t| Value::str(time::format_timestamp(&t))),
        );
        let mut text = format!("---\n{}---\n\n", emit::to_yaml(&Value::Map(m)));
        text.push_str(self.body.trim_end());
        text.push('\n');
        text
    }

    /// Reads a message file's text.
    pub fn from_text(text: &str) -> Result<Letter, MailError> {
        let rest = text
            .strip_prefix("---\n")
            .or_else(|| text.strip_prefix("---\r\n"))
            .ok_or_else(|| invalid("a mail file starts with a --- frontmatter line"))?;
        let end = rest
            .find("\n---")
            .ok_or_else(|| invalid("the frontmatter has no closing --- line"))?;
        let front = yaml::parse_document(&rest[..end + 1], &Limits::DEFAULT)
            .map_err(|e| invalid(format!("frontmatter: {}", e.message)))?;
        let body = rest[end + 4..]
            .trim_start_matches(['\r', '\n'])
            .trim_end()
            .to_owned();
        let m = front
            .as_map()
            .ok_or_else(|| invalid("the frontmatter is not a mapping"))?;
        let text_of = |k: &str| m.get(k).and_then(Value::scalar_text);
        let need =
            |k: &str| text_of(k).ok_or_else(|| invalid(format!("frontmatter: {k} is missing")));
        let at = |k: &str| -> Result<Option<Timestamp>, MailError> {
            text_of(k)
                .map(|t| {
                    time::parse_timestamp_lenient(&t)
                        .map_err(|e| invalid(format!("frontmatter: {k}: {e}")))
                })
                .transpose()
        };
        Ok(Letter {
            from: need("from")?,
            to: need("to")?,
            kind: need("type")?,
            timestamp: at("timestamp")?
                .ok_or_else(|| invalid("frontmatter: timestamp is missing"))?,
            needs_response: matches!(m.get("needs_response"), Some(Value::Bool(true))),
            priority: text_of("priority").unwrap_or_else(|| "normal".to_owned()),
            tags: m
                .get("tags")
                .and_then(Value::as_seq)
                .unwrap_or_default()
                .iter()
                .filter_map(Value::scalar_text)
                .collect(),
            in_reply_to: text_of("in_reply_to"),
            thread_id: text_of("thread_id"),
            expires: at("expires")?,
            read_at: at("read_at")?,
            body,
        })
    }
}

/// The mailboxes of one home: files under `<home>/.mail/`, or rows in the database of tier 1.
#[derive(Debug, Clone)]
pub struct Mail {
    root: PathBuf,
    database: Option<Pg>,
}

impl Mail {
    /// The mail of the home at `home` (`<home>/.mail`).
    pub fn open(home: &Path) -> Mail {
        Mail {
            root: home.join(".mail"),
            database: None,
        }
    }

    /// The mail of the exchange `store` keeps: the home's `.mail/` on files, the database's on
    /// the postgres backend (shared by every node).
    pub fn of(store: &crate::store::Store) -> Mail {
        let home = store.layout().root();
        match store.database() {
            Some(db) => Mail::on_database(home, db.clone()),
            None => Mail::open(home),
        }
    }

    /// The mail of a tier-1 exchange: in its database, shared by every node.
    pub fn on_database(home: &Path, database: Pg) -> Mail {
        Mail {
            root: home.join(".mail"),
            database: Some(database),
        }
    }

    /// Writes `letter` into its recipient's mailbox; returns the file name. A second message
    /// with the same second, sender and type gets `-2`, `-3`, ... after the sender's name
    /// (creation is exclusive, and a name is never reused in any folder of the mailbox).
    pub fn send(&self, letter: &Letter) -> Result<String, MailError> {
        letter.check()?;
        // A name is used once in a mailbox, whatever folder holds it. A second message with
        // the same second, sender and type gets `-2`, `-3`, ... after the sender, so the type
        // stays last and `*_<type>.md` globs still find it.
        let stamp = letter
            .timestamp
            .with_timezone(&chrono::Utc)
            .format("%Y%m%dT%H%M%SZ")
            .to_string();
        let text = letter.to_text();
        for n in 1..10_000 {
            let from = if n == 1 {
                letter.from.clone()
            } else {
                format!("{}-{n}", letter.from)
            };
            let file = format!("{stamp}_{from}_{}.md", letter.kind);
            let created = match &self.database {
                Some(db) => {
                    db.mail_put(&row(&letter.to, letter, &file, Folder::Unread, None, &text))?
                }
                None => self.send_file(letter, &file, &text)?,
            };
            if created {
                return Ok(file);
            }
        }
        Err(invalid(
            "too many messages with the same sender and type in one second",
        ))
    }

    /// How many unread messages from `from` wait in `mailbox`.
    pub fn unread_from(&self, mailbox: &str, from: &str) -> Result<usize, MailError> {
        check_name("mailbox", mailbox)?;
        match &self.database {
            Some(db) => Ok(usize::try_from(db.mail_unread_from(mailbox, from)?).unwrap_or(0)),
            None => self.unread_from_file(mailbox, from),
        }
    }

    /// The messages of `mailbox` in `folder` as `reader` sees them at `now`, oldest first, with
    /// the messages that could not be read (named, not fatal). In `__broadcast`, unread means
    /// not yet read by `reader`, and read means read by `reader` (without a reader: every
    /// message, and `read/` itself). Expired messages and archive older than
    /// [`ARCHIVE_KEEP_DAYS`] are never listed (on files they are deleted as they are found).
    pub fn list(
        &self,
        mailbox: &str,
        folder: Folder,
        reader: Option<&str>,
        now: Timestamp,
    ) -> Result<(Vec<Found>, Vec<String>), MailError> {
        check_name("mailbox", mailbox)?;
        if let Some(reader) = reader {
            check_name("reader", reader)?;
        }
        let Some(db) = &self.database else {
            return self.list_file(mailbox, folder, reader, now);
        };
        let broadcast_reader = reader.filter(|_| mailbox == BROADCAST);
        let rows = match (folder, broadcast_reader) {
            (Folder::Read, Some(reader)) => db.mail_records(mailbox, reader, now.timestamp())?,
            (_, unread_for) => db.mail_list(
                mailbox,
                folder.as_str(),
                unread_for.filter(|_| folder == Folder::Unread),
                now.timestamp(),
                archive_floor(now),
            )?,
        };
        let mut found = Vec::new();
        let mut problems = Vec::new();
        for (file, doc) in rows {
            match Letter::from_text(&doc) {
                Ok(letter) => found.push(Found {
                    mailbox: mailbox.to_owned(),
                    folder,
                    file,
                    letter,
                }),
                Err(e) => problems.push(format!("{mailbox}/{file}: {e}")),
            }
        }
        Ok((found, problems))
    }

    /// Finds `file` in `mailbox` for `reader` at `now`, in whichever folder it is (a
    /// `__broadcast` message `reader` has read is in `read`); an expired message is not found.
    pub fn read(
        &self,
        mailbox: &str,
        file: &str,
        reader: Option<&str>,
        now: Timestamp,
    ) -> Result<Found, MailError> {
        check_name("mailbox", mailbox)?;
        check_file(file)?;
        let Some(db) = &self.database else {
            return self.read_file(mailbox, file, reader, now);
        };
        let (t, keep) = (now.timestamp(), archive_floor(now));
        let record = match reader.filter(|_| mailbox == BROADCAST) {
            Some(reader) => {
                check_name("reader", reader)?;
                db.mail_get(mailbox, file, Some(reader), t, keep)?
            }
            None => None,
        };
        let Some((folder, doc)) = record.map_or_else(
            || db.mail_get(mailbox, file, None, t, keep),
            |r| Ok(Some(r)),
        )?
        else {
            return Err(MailError::NotFound {
                message: format!("no message {file} in mailbox {mailbox}"),
            });
        };
        Ok(Found {
            mailbox: mailbox.to_owned(),
            folder: Folder::parse(&folder)?,
            file: file.to_owned(),
            letter: Letter::from_text(&doc)?,
        })
    }

    /// Marks an unread message read by `reader`. In a session or tag mailbox that is the claim:
    /// the message moves into `read/` (of several readers exactly one succeeds; the others get
    /// [`MailError::Claimed`]) and records `read_at`. A `__broadcast` message stays unread for
    /// every other session: `reader` gets its own copy with `read_at` in `read/<reader>/`,
    /// created exclusively, so reading it twice is refused the same way.
    pub fn mark_read(
        &self,
        mailbox: &str,
        file: &str,
        reader: &str,
        now: Timestamp,
    ) -> Result<Found, MailError> {
        check_name("mailbox", mailbox)?;
        check_file(file)?;
        check_name("reader", reader)?;
        let Some(db) = &self.database else {
            return self.mark_read_file(mailbox, file, reader, now);
        };
        let unread = db
            .mail_get(mailbox, file, None, now.timestamp(), archive_floor(now))?
            .filter(|(folder, _)| folder == Folder::Unread.as_str());
        let Some((_, doc)) = unread else {
            return Err(self.not_unread(mailbox, file, Some(reader), now));
        };
        let mut letter = Letter::from_text(&doc)?;
        letter.read_at = Some(now);
        let text = letter.to_text();
        let won = if mailbox == BROADCAST {
            db.mail_put(&row(
                mailbox,
                &letter,
                file,
                Folder::Read,
                Some(reader),
                &text,
            ))?
        } else {
            db.mail_claim(mailbox, file, &text)?
        };
        if !won {
            return Err(self.not_unread(mailbox, file, Some(reader), now));
        }
        Ok(Found {
            mailbox: mailbox.to_owned(),
            folder: Folder::Read,
            file: file.to_owned(),
            letter,
        })
    }

    /// Why `file` could not be marked read: it was read already (by another reader of a shared
    /// mailbox, or by `reader` in `__broadcast`), or it does not exist (any more).
    fn not_unread(
        &self,
        mailbox: &str,
        file: &str,
        reader: Option<&str>,
        now: Timestamp,
    ) -> MailError {
        match self.read(mailbox, file, reader, now) {
            Ok(found) if mailbox == BROADCAST && found.folder == Folder::Read => {
                MailError::Claimed {
                    message: format!(
                        "{mailbox}/{file} was already read by {}",
                        reader.unwrap_or_default()
                    ),
                }
            }
            Ok(found) if mailbox != BROADCAST => MailError::Claimed {
                message: format!(
                    "{mailbox}/{file} was already read (it is in {})",
                    found.folder.as_str()
                ),
            },
            _ => MailError::NotFound {
                message: format!("no unread message {file} in mailbox {mailbox}"),
            },
        }
    }

    /// Deletes, in every mailbox and folder (readers' `__broadcast` records included), the
    /// messages whose `expires` has come and the archive older than [`ARCHIVE_KEEP_DAYS`];
    /// returns how many went. Files that cannot be read are left for a person to look at.
    pub fn prune(&self, now: Timestamp) -> Result<usize, MailError> {
        match &self.database {
            Some(db) => Ok(
                usize::try_from(db.mail_prune(now.timestamp(), archive_floor(now))?)
                    .unwrap_or(usize::MAX),
            ),
            None => self.prune_file(now),
        }
    }

    /// Moves a message (unread or read) into `archive/`.
    pub fn archive(&self, mailbox: &str, file: &str) -> Result<(), MailError> {
        check_name("mailbox", mailbox)?;
        check_file(file)?;
        let Some(db) = &self.database else {
            return self.archive_file(mailbox, file);
        };
        match db.mail_archive(mailbox, file)? {
            Some(_) => Ok(()),
            None => Err(MailError::NotFound {
                message: format!("no message {file} in mailbox {mailbox}"),
            }),
        }
    }
}

/// What copying mail from one store to another did.
#[derive(Debug, Default, Clone)]
pub struct Copied {
    /// Messages and records written.
    pub copied: usize,
    /// Those the target had already (left alone).
    pub present: usize,
    /// Files that could not be read, named.
    pub problems: Vec<String>,
}

impl Mail {
    /// What [`Mail::copy_to`] would refuse to copy (files that do not read as mail), without
    /// copying anything: an import checks it before it writes.
    pub fn check_copy(&self) -> Result<Vec<String>, MailError> {
        match &self.database {
            Some(_) => Ok(Vec::new()),
            None => Ok(self.rows_file()?.1),
        }
    }

    /// Copies every message and `__broadcast` record into `to` with its exact text, leaving
    /// alone what `to` has already: how `mess import` and `mess export` move mail between a
    /// home's files and a database.
    pub fn copy_to(&self, to: &Mail) -> Result<Copied, MailError> {
        let mut report = Copied::default();
        let rows = match &self.database {
            Some(db) => db.mail_rows()?,
            None => {
                let (rows, problems) = self.rows_file()?;
                report.problems = problems;
                rows
            }
        };
        for row in &rows {
            let written = match &to.database {
                Some(db) => db.mail_put(row)?,
                None => to.put_file(row)?,
            };
            if written {
                report.copied += 1;
            } else {
                report.present += 1;
            }
        }
        Ok(report)
    }
}

impl Mail {
    /// What identifies this database's mail as it is now (every write changes it); `None` on
    /// files.
    pub fn version(&self) -> Result<Option<(i64, i64)>, MailError> {
        match &self.database {
            Some(db) => Ok(Some(db.mail_version()?)),
            None => Ok(None),
        }
    }

    /// Writes this database's mail into the files of `mirror` (a node's home), so the `mail`
    /// view and readers of the format's files see it on every node; returns how many files
    /// changed. Nothing to do on files.
    pub fn mirror_into(&self, mirror: &Mail) -> Result<usize, MailError> {
        match (&self.database, &mirror.database) {
            (Some(db), None) => mirror.mirror_file(&db.mail_rows()?),
            _ => Ok(0),
        }
    }
}

/// The oldest archive kept at `now`, in seconds since 1970.
fn archive_floor(now: Timestamp) -> i64 {
    (now - chrono::TimeDelta::days(ARCHIVE_KEEP_DAYS)).timestamp()
}

/// `letter` as a database row of `mailbox` named `file` in `folder` (a record of `reader`), with `text`.
fn row(
    mailbox: &str,
    letter: &Letter,
    file: &str,
    folder: Folder,
    reader: Option<&str>,
    text: &str,
) -> MailRow {
    MailRow {
        mailbox: mailbox.to_owned(),
        file: file.to_owned(),
        folder: folder.as_str().to_owned(),
        reader: reader.map(str::to_owned),
        sender: letter.from.clone(),
        doc: text.to_owned(),
        written: letter.timestamp.timestamp(),
        expires: letter.expires.map(|t| t.timestamp()),
    }
}
