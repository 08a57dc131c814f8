//! Agent mail (`mail-storage-format.md`): Markdown files with YAML frontmatter in mailboxes
//! under `<home>/.mail/<mailbox>/` (unread), `read/` and `archive/`; a message is claimed by
//! renaming it into `read/`, so of several readers of a shared (tag) mailbox exactly one gets
//! it. Synchronous, and knows nothing of threads, queries or notifications.

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use crate::protocol::emit;
use crate::protocol::time::{self, Timestamp};
use crate::protocol::value::{Map, Value};
use crate::protocol::yaml::{self, Limits};
use crate::store::error::StoreError;
use crate::store::fsio;

/// The mailbox every session reads besides its own.
pub const BROADCAST: &str = "__broadcast";

/// The message types of the format.
pub const TYPES: [&str; 7] = [
    "status", "alert", "task", "question", "response", "report", "handoff",
];

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

    const ALL: [Folder; 3] = [Folder::Unread, Folder::Read, Folder::Archive];
}

/// One message: the frontmatter fields and the Markdown body.
#[derive(Debug, Clone, PartialEq)]
pub struct Letter {
    /// The sender.
    pub from: String,
    /// The recipient: a session name, a tag, or `__broadcast`.
    pub to: String,
    /// One of [`TYPES`].
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
        if !TYPES.contains(&self.kind.as_str()) {
            return Err(invalid(format!(
                "type {:?} is not one of {}",
                self.kind,
                TYPES.join(", ")
            )));
        }
        if !matches!(self.priority.as_str(), "urgent" | "normal" | "low") {
            return Err(invalid(format!(
                "priority {:?} is not one of urgent, normal, low",
                self.priority
            )));
        }
        if let Some(r) = &self.in_reply_to {
            check_file(r)?;
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

/// The mailboxes of one home.
#[derive(Debug, Clone)]
pub struct Mail {
    root: PathBuf,
}

impl Mail {
    /// The mail of the home at `home` (`<home>/.mail`).
    pub fn open(home: &Path) -> Mail {
        Mail {
            root: home.join(".mail"),
        }
    }

    fn dir(&self, mailbox: &str, folder: Folder) -> PathBuf {
        let base = self.root.join(mailbox);
        match folder {
            Folder::Unread => base,
            Folder::Read => base.join("read"),
            Folder::Archive => base.join("archive"),
        }
    }

    /// Writes `letter` into its recipient's mailbox; returns the file name. A second message
    /// with the same second, sender and type gets `-2`, `-3`, ... after the sender's name
    /// (creation is exclusive, and a name is never reused in any folder of the mailbox).
    pub fn send(&self, letter: &Letter) -> Result<String, MailError> {
        letter.check()?;
        let dir = self.dir(&letter.to, Folder::Unread);
        fsio::ensure_dir(&dir)?;
        let text = letter.to_text();
        // A name is used once in a mailbox, whatever folder holds it. A second message with
        // the same second, sender and type gets `-2`, `-3`, ... after the sender, so the type
        // stays last and `*_<type>.md` globs still find it.
        let stamp = letter
            .timestamp
            .with_timezone(&chrono::Utc)
            .format("%Y%m%dT%H%M%SZ")
            .to_string();
        for n in 1..10_000 {
            let from = if n == 1 {
                letter.from.clone()
            } else {
                format!("{}-{n}", letter.from)
            };
            let file = format!("{stamp}_{from}_{}.md", letter.kind);
            if Folder::ALL
                .iter()
                .any(|f| self.dir(&letter.to, *f).join(&file).exists())
            {
                continue;
            }
            match fsio::create_atomic(&dir.join(&file), text.as_bytes()) {
                Ok(()) => return Ok(file),
                Err(StoreError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e.into()),
            }
        }
        Err(invalid(
            "too many messages with the same sender and type in one second",
        ))
    }

    /// How many unread messages from `from` wait in `mailbox`, counted by file name (senders
    /// hold no underscore, so `_<from>_` or `_<from>-<n>_` names the sender).
    pub fn unread_from(&self, mailbox: &str, from: &str) -> Result<usize, MailError> {
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

    /// The messages of `mailbox` in `folder`, oldest first, with the files that could not be
    /// read (named, not fatal).
    pub fn list(
        &self,
        mailbox: &str,
        folder: Folder,
    ) -> Result<(Vec<Found>, Vec<String>), MailError> {
        check_name("mailbox", mailbox)?;
        let dir = self.dir(mailbox, folder);
        let mut names: Vec<String> = match std::fs::read_dir(&dir) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| check_file(n).is_ok())
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(StoreError::io(&dir, e).into()),
        };
        names.sort();
        let mut found = Vec::new();
        let mut problems = Vec::new();
        for file in names {
            match std::fs::read_to_string(dir.join(&file)) {
                Ok(text) => match Letter::from_text(&text) {
                    Ok(letter) => found.push(Found {
                        mailbox: mailbox.to_owned(),
                        folder,
                        file,
                        letter,
                    }),
                    Err(e) => problems.push(format!("{mailbox}/{file}: {e}")),
                },
                // Claimed by another reader meanwhile.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => problems.push(format!("{mailbox}/{file}: {e}")),
            }
        }
        Ok((found, problems))
    }

    /// Finds `file` in `mailbox`, in whichever folder it is.
    pub fn read(&self, mailbox: &str, file: &str) -> Result<Found, MailError> {
        check_name("mailbox", mailbox)?;
        check_file(file)?;
        for folder in Folder::ALL {
            match std::fs::read_to_string(self.dir(mailbox, folder).join(file)) {
                Ok(text) => {
                    return Ok(Found {
                        mailbox: mailbox.to_owned(),
                        folder,
                        file: file.to_owned(),
                        letter: Letter::from_text(&text)?,
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io(&self.dir(mailbox, folder), e).into()),
            }
        }
        Err(MailError::NotFound {
            message: format!("no message {file} in mailbox {mailbox}"),
        })
    }

    /// Claims an unread message: renames it into `read/` (of several readers exactly one
    /// succeeds; the others get [`MailError::Claimed`]), then records `read_at`.
    pub fn mark_read(&self, mailbox: &str, file: &str, now: Timestamp) -> Result<Found, MailError> {
        check_name("mailbox", mailbox)?;
        check_file(file)?;
        let from = self.dir(mailbox, Folder::Unread).join(file);
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
                return Err(if let Ok(found) = self.read(mailbox, file) {
                    MailError::Claimed {
                        message: format!(
                            "{mailbox}/{file} was already read (it is in {})",
                            found.folder.as_str()
                        ),
                    }
                } else {
                    MailError::NotFound {
                        message: format!("no message {file} in mailbox {mailbox}"),
                    }
                });
            }
            Err(e) => return Err(StoreError::io(&from, e).into()),
        }
        fsio::sync_parent(&from)?;
        fsio::sync_parent(&to)?;
        let text = std::fs::read_to_string(&to).map_err(|e| StoreError::io(&to, e))?;
        let mut letter = Letter::from_text(&text)?;
        letter.read_at = Some(now);
        fsio::write_atomic(&to, letter.to_text().as_bytes())?;
        Ok(Found {
            mailbox: mailbox.to_owned(),
            folder: Folder::Read,
            file: file.to_owned(),
            letter,
        })
    }

    /// Moves a message (unread or read) into `archive/`.
    pub fn archive(&self, mailbox: &str, file: &str) -> Result<(), MailError> {
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
