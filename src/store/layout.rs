//! Where everything lives in an exchange home: the `state=` folders, the archive, configuration,
//! and the internal `.mess/` folder. Only this module turns refs into paths.

use std::path::{Path, PathBuf};

use chrono::Datelike;

use crate::protocol::envelope::Envelope;
use crate::protocol::ids::ThreadRef;
use crate::protocol::status::State;

/// File name suffix of the thread files mess writes.
pub const THREAD_SUFFIX: &str = ".messe-af.yaml";

/// Every suffix a thread file may have: MESSE-AF allows `.messe-af` too, and files other
/// writers named so are read, moved and archived like ours (a rewrite names them ours).
pub const THREAD_SUFFIXES: [&str; 2] = [THREAD_SUFFIX, ".messe-af"];

/// Where a thread file sits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Location {
    /// In `state=<state>/`.
    State(State),
    /// In `archive/<month>/` (`YYYY-MM`).
    Archive(String),
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::State(s) => write!(f, "state={s}"),
            Location::Archive(m) => write!(f, "archive/{m}"),
        }
    }
}

/// The paths of one exchange home.
#[derive(Debug, Clone)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    /// The layout of the home at `root`.
    pub fn new(root: &Path) -> Layout {
        Layout {
            root: root.to_owned(),
        }
    }

    /// The home folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `state=<state>/`.
    pub fn state_dir(&self, state: State) -> PathBuf {
        self.root.join(format!("state={}", state.as_str()))
    }

    /// `archive/`.
    pub fn archive_dir(&self) -> PathBuf {
        self.root.join("archive")
    }

    /// The folder for a location.
    pub fn dir(&self, location: &Location) -> PathBuf {
        match location {
            Location::State(s) => self.state_dir(*s),
            Location::Archive(month) => self.archive_dir().join(month),
        }
    }

    /// The thread file of `thread` at `location`, as mess writes it.
    pub fn thread_path(&self, location: &Location, thread: &ThreadRef) -> PathBuf {
        self.dir(location).join(file_name(thread))
    }

    /// Every path the thread file of `thread` may have at `location` (one per suffix), the
    /// one mess writes first.
    pub fn thread_paths(&self, location: &Location, thread: &ThreadRef) -> [PathBuf; 2] {
        let dir = self.dir(location);
        THREAD_SUFFIXES.map(|suffix| dir.join(format!("{}{suffix}", thread.as_str())))
    }

    /// `config.yaml`.
    pub fn config_file(&self) -> PathBuf {
        self.root.join("config.yaml")
    }

    /// `capabilities.yaml`, the optional capability catalog.
    pub fn capabilities_file(&self) -> PathBuf {
        self.root.join("capabilities.yaml")
    }

    /// `executors/`: executor registrations made by `config` messages, one file each.
    pub fn registrations_dir(&self) -> PathBuf {
        self.root.join("executors")
    }

    /// `routing.yaml`: routing rules set by `config` messages (they replace config.yaml's).
    pub fn routing_file(&self) -> PathBuf {
        self.root.join("routing.yaml")
    }

    /// `ledger/`: the shells ledger, a file per month.
    pub fn ledger_dir(&self) -> PathBuf {
        self.root.join("ledger")
    }

    /// `.mess/`: locks, counters, indexes and other internal state.
    pub fn internal_dir(&self) -> PathBuf {
        self.root.join(".mess")
    }

    /// `.mess/keys.yaml`: API keys by hash (mode 0600).
    pub fn keys_file(&self) -> PathBuf {
        self.internal_dir().join("keys.yaml")
    }

    /// `.mess/secret`: the key that signs presigned links (mode 0600).
    pub fn secret_file(&self) -> PathBuf {
        self.internal_dir().join("secret")
    }

    /// `.mess/webhook-secret`: the key that signs webhooks when none is configured (mode 0600).
    pub fn webhook_secret_file(&self) -> PathBuf {
        self.internal_dir().join("webhook-secret")
    }

    /// `.mess/exchange-id`: this home's exchange id, the audience of its links.
    pub fn exchange_id_file(&self) -> PathBuf {
        self.internal_dir().join("exchange-id")
    }

    /// `.mess/mirror-horizon`: how far this mirror has followed the database's change feed.
    pub(crate) fn mirror_horizon_file(&self) -> PathBuf {
        self.internal_dir().join("mirror-horizon")
    }

    pub(crate) fn locks_dir(&self) -> PathBuf {
        self.internal_dir().join("locks")
    }

    pub(crate) fn refs_dir(&self) -> PathBuf {
        self.internal_dir().join("refs")
    }

    pub(crate) fn index_dir(&self) -> PathBuf {
        self.internal_dir().join("index")
    }

    pub(crate) fn deps_dir(&self) -> PathBuf {
        self.internal_dir().join("deps")
    }

    /// `.mess/quarantine/`: bytes that `fsck --repair` removed from thread files, kept for people.
    pub fn quarantine_dir(&self) -> PathBuf {
        self.internal_dir().join("quarantine")
    }
}

/// The file name of a thread.
pub fn file_name(thread: &ThreadRef) -> String {
    format!("{}{THREAD_SUFFIX}", thread.as_str())
}

/// The ref named by a thread file name, if it is one.
pub fn ref_of_file(name: &str) -> Option<ThreadRef> {
    let stem = THREAD_SUFFIXES
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))?;
    ThreadRef::parse(stem).ok()
}

/// The archive month of a thread: from its ref's date when it has one, else from `created`.
pub fn archive_month(envelope: &Envelope) -> String {
    match envelope.thread_ref.date_serial() {
        Some((date, _)) => format!("{:04}-{:02}", date.year(), date.month()),
        None => envelope.created.format("%Y-%m").to_string(),
    }
}
