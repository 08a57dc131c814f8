//! The exchange's use cases: submitting MESS messages, the thread lifecycle rules
//! (docs/protocol.md), expiry, dependencies, routing and notification delivery in the background,
//! agent mail, user queries through query workers, and the read views; `access` alone decides who
//! may see and do what. The only module that combines `protocol`, `store`, `db`, `mail`, `notify`
//! and `links`; the adapters (`cli`, `http`, `mcp`) call it.
//!
//! Every use case reads the clock once and writes the thread file before anything that derives
//! from it.

pub mod access;
pub mod auth;
pub mod background;
mod backoff;
pub mod buttons;
mod callbacks;
pub mod clock;
mod config_keys;
pub mod dashboard;
pub mod dashboard_login;
pub mod deliver;
pub mod demo;
pub mod directory;
pub mod error;
mod escrow;
pub mod hands;
pub mod hooks;
mod import;
pub mod jobs;
mod lifecycle;
pub mod mail_sweep;
mod matrix;
mod outcome;
pub mod peers;
mod plan;
pub mod queries;
mod queue;
mod requests;
mod robot_input;
mod robots;
pub mod route;
pub mod sessions;
mod shells;
mod submit;
mod suggestions;
pub mod sweep;
pub mod telemetry;
pub mod view;
pub mod watch;

#[cfg(test)]
mod flow_tests;
#[cfg(test)]
mod prop_tests;
#[cfg(test)]
mod tests;

use std::sync::{Arc, OnceLock};

use tokio::sync::broadcast;

use crate::db::Db;

use crate::protocol::envelope::Envelope;
use crate::protocol::ids::ThreadRef;
use crate::protocol::status::{State, Status};
use crate::protocol::time::{self, Timestamp};
use crate::store::Store;
use crate::store::error::StoreError;
use crate::store::layout::Location;
use crate::store::thread::ThreadFile;

use self::clock::Clock;
use self::error::Error;

/// Settings the exchange needs (a slice of the resolved configuration).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Largest accepted message, in bytes (inline data URIs included).
    pub max_message_bytes: usize,
    /// Largest thread file, in bytes: a message that would grow a thread past it is refused.
    pub max_thread_bytes: usize,
    /// The key that signs presigned links (`MESS_SECRET`); `None` uses the home's generated one.
    pub link_secret: Option<Secret>,
    /// Notification policy: links, retries, escalation.
    pub dispatch: NoticePolicy,
    /// Whether new requests are routed by a background router ([`route`]) instead of
    /// before their create is acknowledged (a server turns this on; one-shot commands route
    /// at once, as nobody else would).
    pub route_in_background: bool,
    /// How user SQL runs: worker processes, their memory ceiling, queries at once.
    pub queries: queries::QuerySettings,
}

impl Settings {
    /// The documented defaults: 16 MiB messages, 64 MiB threads, the home's own link secret.
    pub fn defaults() -> Settings {
        Settings {
            max_message_bytes: 16 * 1024 * 1024,
            max_thread_bytes: 64 * 1024 * 1024,
            link_secret: None,
            dispatch: NoticePolicy::defaults(),
            route_in_background: false,
            queries: queries::QuerySettings::defaults(),
        }
    }

    /// The configured link secret, if any.
    pub fn link_secret(&self) -> Option<&str> {
        self.link_secret.as_ref().map(Secret::expose)
    }
}

pub use crate::notify::Secret;

/// How the exchange notifies executors (`dispatch:` in config.yaml, beside the channels'
/// settings that `notify` takes).
#[derive(Debug, Clone)]
pub struct NoticePolicy {
    /// The exchange's address as executors' browsers reach it, for links (`MESS_PUBLIC_URL`).
    pub public_url: String,
    /// The issuer its links name and it accepts, when not `public_url`: with no address given,
    /// links point where the server listens, which may change between runs, while the links
    /// already handed out must keep working.
    pub link_issuer: Option<String>,
    /// How long a link in a notification works.
    pub link_ttl_seconds: i64,
    /// Attempts before a delivery is given up (and recorded in the thread).
    pub attempts: u32,
    /// Wait after the first failure; it doubles with each further failure (with jitter).
    pub first_retry: std::time::Duration,
    /// The longest wait between attempts.
    pub max_retry: std::time::Duration,
    /// After this long without a claim, a routed request is offered to the `default` rule's
    /// executors too (`None`: never).
    pub escalate_after: Option<std::time::Duration>,
    /// Expands `${ENV}` references in configuration values read at use time (an executor's
    /// webhook key in config.yaml); the configuration layer supplies it, as only it reads the
    /// environment.
    pub expand: fn(&str) -> String,
    /// The key that signs webhooks without their own (`dispatch.webhook.secret`); `None`
    /// signs with the home's generated key.
    pub webhook_secret: Option<Secret>,
    /// Where webhooks of key-made registrations may lead besides public addresses
    /// (`dispatch.webhook.allow`), checked when they register.
    pub webhook_allow: crate::notify::Allow,
    /// Channels that cannot send for lack of settings, each with what it lacks (filled in by
    /// the configuration layer from the channels' settings), so executors using them are
    /// reported before a delivery fails.
    pub unconfigured: Vec<(&'static str, &'static str)>,
    /// How long a due notice may wait before `mess status` and MCP answers say that the
    /// process sending notices seems stuck.
    pub overdue: std::time::Duration,
}

impl NoticePolicy {
    /// The issuer of this exchange's links ([`NoticePolicy::link_issuer`], else `public_url`).
    pub fn issuer(&self) -> &str {
        self.link_issuer.as_deref().unwrap_or(&self.public_url)
    }

    /// The documented defaults: links to `http://127.0.0.1:8420` valid 24 h, 8 attempts from
    /// 2 s up to 10 min apart, escalation after 15 min.
    pub fn defaults() -> NoticePolicy {
        NoticePolicy {
            public_url: "http://127.0.0.1:8420".to_owned(),
            link_issuer: None,
            link_ttl_seconds: 24 * 3600,
            attempts: 8,
            first_retry: std::time::Duration::from_secs(2),
            max_retry: std::time::Duration::from_secs(600),
            escalate_after: Some(std::time::Duration::from_secs(900)),
            expand: str::to_owned,
            webhook_secret: None,
            webhook_allow: crate::notify::Allow::public_only(),
            unconfigured: Vec::new(),
            overdue: std::time::Duration::from_secs(60),
        }
    }
}

/// Envelopes with their locations, and the files that could not be read.
pub type Listing = (Vec<(Envelope, Location)>, Vec<StoreError>);

/// Who sent a message and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sender {
    /// The principal: an agent or executor id.
    pub id: String,
    /// The channel it came through (`cli`, `mcp`, `http`, ...).
    pub channel: String,
    /// The role of the key it authenticated with; `None` for local callers (the CLI, `mess
    /// mcp` on stdio), who can write the home's files anyway and are trusted as its operator.
    pub role: Option<auth::Role>,
    /// The callback of the key it authenticated with (see [`auth::Principal::callback`]).
    pub callback: Option<String>,
}

impl Sender {
    /// A local sender on a channel (no key, so no role restrictions).
    pub fn new(id: impl Into<String>, channel: impl Into<String>) -> Sender {
        Sender {
            id: id.into(),
            channel: channel.into(),
            role: None,
            callback: None,
        }
    }

    /// An authenticated principal on a channel: it may send only what its role allows.
    pub fn principal(who: &auth::Principal, channel: impl Into<String>) -> Sender {
        Sender {
            id: who.id.clone(),
            channel: channel.into(),
            role: Some(who.role),
            callback: who.callback.clone(),
        }
    }
}

/// The exchange over one home.
#[derive(Debug, Clone)]
pub struct Exchange {
    store: Store,
    settings: Settings,
    clock: Arc<dyn Clock>,
    /// The read model, opened on first use (most commands never need DuckDB).
    db: Arc<OnceLock<Db>>,
    /// Every committed change of a thread written through this exchange (or, while a
    /// [`watch::HomeWatch`] runs, by other processes).
    changes: broadcast::Sender<ThreadChange>,
    /// What was announced, so each change is announced once.
    announced: Arc<watch::Announced>,
    /// API key records, re-read only when the keys file changes.
    keys: Arc<auth::KeyCache>,
    /// Wakes this process's delivery worker when a delivery is queued.
    deliveries: Arc<tokio::sync::Notify>,
    /// Bounds the memory all message parsing in this process takes at once.
    parsing: Arc<submit::ParseGate>,
    /// The directory as last read, with the stamp of the files it came from: access checks run
    /// on every request and change event, and reading the files each time cost more than them.
    directory: Arc<std::sync::Mutex<Option<CachedDirectory>>>,
    /// User SQL: queries at once, and the workers that run them.
    queries: Arc<queries::Queries>,
    /// The pending threads in queue order, while this process follows the home.
    queue: Arc<queue::Queue>,
}

pub(crate) use crate::protocol::access::listing_order;

/// The directory as read, and the stamp of the registry files it was read from.
type CachedDirectory = (
    crate::store::registry::RegistryStamp,
    Arc<directory::Directory>,
);

/// A thread this process changed: written and durable before it is announced.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadChange {
    /// The thread.
    pub thread: ThreadRef,
    /// Its status after the change.
    pub status: Status,
    /// Its `updated` after the change.
    pub updated: Timestamp,
    /// The envelope as written (who may see the change depends on it).
    pub envelope: Arc<Envelope>,
    /// Where the change stands in the database's change feed (tier 1), as `/events` ids: a
    /// client that reconnects to any node with it as `Last-Event-ID` gets every change since.
    /// `None` on files.
    pub cursor: Option<String>,
}

impl ThreadChange {
    /// Whether the change only recorded the exchange's own bookkeeping (a routing decision,
    /// an escalation, a notification that failed), with status and messages as before: the
    /// requestor has nothing new to read.
    pub fn is_routing(&self) -> bool {
        self.envelope.history.last().is_some_and(|h| {
            matches!(
                h.action.as_str(),
                "dispatched" | "escalated" | "notify_failed" | "unroutable"
            )
        })
    }
}

/// Changes a slow listener may fall behind by before it is told it missed some.
const CHANGE_BACKLOG: usize = 4096;

impl Exchange {
    /// An exchange over `store`.
    pub fn new(store: Store, settings: Settings, clock: Arc<dyn Clock>) -> Exchange {
        let settings_queries = settings.queries.clone();
        let (changes, _) = broadcast::channel(CHANGE_BACKLOG);
        let announce = changes.clone();
        let announced = Arc::new(watch::Announced::default());
        let seen = announced.clone();
        let queue = Arc::new(queue::Queue::default());
        let queued = queue.clone();
        let store = store.observed(Arc::new(move |env: &Envelope| {
            queued.note(env);
            if !seen.first(env) {
                return;
            }
            // No listener is not an error: most commands never listen.
            let _ = announce.send(ThreadChange {
                thread: env.thread_ref.clone(),
                status: env.status,
                updated: env.updated,
                envelope: Arc::new(env.clone()),
                cursor: None,
            });
        }));
        let store = store.edited(Arc::new(|before, edit| {
            callbacks::queue(before, edit);
            escrow::queue(before, edit);
        }));
        Exchange {
            store,
            settings,
            clock,
            db: Arc::new(OnceLock::new()),
            changes,
            announced,
            keys: Arc::new(auth::KeyCache::default()),
            deliveries: Arc::new(tokio::sync::Notify::new()),
            parsing: Arc::new(submit::ParseGate::default()),
            directory: Arc::default(),
            queries: Arc::new(queries::Queries::new(settings_queries)),
            queue,
        }
    }

    /// Whether this exchange can serve: always on files; in tier 1, when its database answers.
    pub fn health(&self) -> Result<(), Error> {
        Ok(self.store.ping()?)
    }

    /// The read model over this home, opened on first use (and tried again on the next use if
    /// opening failed: a long-running server must not keep one failure forever).
    pub fn db(&self) -> Result<&Db, String> {
        if let Some(opened) = self.db.get() {
            return Ok(opened);
        }
        let opened = Db::open(self.store.layout().root()).map_err(|e| e.to_string())?;
        Ok(self.db.get_or_init(|| opened))
    }

    /// This exchange with routing left to a background router ([`route::run`]), for
    /// a server: creates are acknowledged once durable, without waiting for routing.
    pub fn with_background_routing(mut self) -> Exchange {
        self.settings.route_in_background = true;
        self
    }

    /// This exchange with `url` as its address in links (a server that learnt where it
    /// listens).
    pub fn with_public_url(mut self, url: String) -> Exchange {
        self.settings.dispatch.public_url = url;
        self
    }

    /// What a remote caller may read of `e`: the message with the home written as `<home>`
    /// (a query names the file it could not parse, but no server path leaves), or, for an
    /// internal failure, a generic line after logging the real one.
    pub fn public_message(&self, e: &Error) -> String {
        if e.kind() == error::ErrorKind::Internal {
            tracing::error!(error = %e, "internal error");
            return "the exchange could not complete this; the server log has the details"
                .to_owned();
        }
        self.scrub_home(&e.to_string())
    }

    /// `text` with this home's path (as configured and as resolved) written as `<home>`.
    pub fn scrub_home(&self, text: &str) -> String {
        let home = self.store.layout().root();
        let mut homes = vec![home.to_string_lossy().into_owned()];
        if let Ok(real) = home.canonicalize() {
            homes.push(real.to_string_lossy().into_owned());
        }
        homes
            .iter()
            .filter(|h| h.len() > 1)
            .fold(text.to_owned(), |t, h| t.replace(h.as_str(), "<home>"))
    }

    /// The executors, rules and catalog in effect: read again only when a registry file
    /// changed (a `config` message, an edit of config.yaml) since the last read.
    pub fn directory(&self) -> Arc<directory::Directory> {
        let stamp = self.store.registry_stamp();
        let mut cached = match self.directory.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some((seen, dir)) = cached.as_ref()
            && *seen == stamp
        {
            return dir.clone();
        }
        let dir = Arc::new(directory::Directory::load(&self.store));
        *cached = Some((stamp, dir.clone()));
        dir
    }

    /// The settings this exchange runs with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The agent mailboxes of this exchange: the home's `.mail/`, or the database's in tier 1.
    pub fn mail(&self) -> crate::mail::Mail {
        crate::mail::Mail::of(&self.store)
    }

    /// The store underneath: the exchange's alone (everything outside asks the exchange).
    pub(in crate::exchange) fn store(&self) -> &Store {
        &self.store
    }

    /// The current instant, as written into files.
    pub fn now(&self) -> Timestamp {
        time::utc(self.clock.now())
    }

    /// Problems in config.yaml, registrations, routing rules and the capability catalog, one
    /// line each (entries with problems are skipped, the rest works).
    pub fn config_problems(&self) -> Vec<String> {
        let mut problems = self.directory().problems.clone();
        problems.extend(self.outbox().channel_problems());
        problems
    }

    /// Resolves a reference as `sender` would mean it: a ref, one of the sender's client ids or
    /// suggestion ids, or `last`.
    pub fn resolve(&self, reference: &str, sender: &str) -> Result<ThreadRef, Error> {
        plan::resolve(self, reference, sender)
    }

    /// Reads a thread for display, expiring it first if it is overdue.
    /// The envelope of `thread` as it is stored, with no access check and nothing settled:
    /// for the operator's own commands on the exchange's host.
    pub fn envelope(&self, thread: &ThreadRef) -> Result<Envelope, Error> {
        Ok(self.store.envelope(thread)?.0)
    }

    pub fn thread(&self, reference: &str, sender: &str) -> Result<ThreadFile, Error> {
        let thread = self.resolve(reference, sender)?;
        let now = self.now();
        if let Ok((env, _)) = self.store.envelope(&thread) {
            lifecycle::settle(self, &env, now)?;
        }
        Ok(self.store.read(&thread)?)
    }

    /// Envelopes of threads in `states` (and the archive), in listing order (waiting work
    /// first), after expiring overdue threads. Unreadable files come back as errors beside the
    /// rest.
    pub fn list(&self, states: &[State], archive: bool) -> Result<Listing, Error> {
        let now = self.now();
        let (listed, errors) = self.store.list(states, archive);
        let mut items = Vec::with_capacity(listed.len());
        for (env, location, path) in listed {
            if !lifecycle::settle(self, &env, now)? {
                items.push((env, location, path));
                continue;
            }
            // Expired or dispatched just now: show it as it is after that write.
            let (env, location) = self.store.envelope(&env.thread_ref)?;
            if matches!(location, Location::State(s) if states.contains(&s)) {
                items.push((env, location, path));
            }
        }
        items.sort_by(|a, b| listing_order(&a.0, &b.0));
        Ok((items.into_iter().map(|(e, l, _)| (e, l)).collect(), errors))
    }
}
