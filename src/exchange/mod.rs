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
mod callbacks;
pub mod clock;
mod config_keys;
pub mod deliver;
pub mod demo;
pub mod directory;
pub mod error;
mod escrow;
mod import;
pub mod jobs;
mod lifecycle;
pub mod mail_sweep;
mod outcome;
pub mod peers;
mod plan;
pub mod queries;
mod queue;
mod requests;
mod robot_input;
mod robots;
pub mod route;
mod shells;
mod submit;
mod suggestions;
pub mod sweep;
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
use crate::db::query::{self, ArrowAnswer, QueryLimits, QueryResult};
use crate::db::worker;
use crate::protocol::envelope::Envelope;
use crate::protocol::error::ProtocolError;
use crate::protocol::ids::ThreadRef;
use crate::protocol::message::Message;
use crate::protocol::status::{State, Status};
use crate::protocol::time::{self, Timestamp};
use crate::protocol::yaml::{self, Limits};
use crate::store::archive::ArchiveReport;
use crate::store::error::StoreError;
use crate::store::fsck::FsckReport;
use crate::store::layout::Location;
use crate::store::thread::ThreadFile;
use crate::store::{HeadMemo, Store};

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
    /// The documented defaults: links to `http://127.0.0.1:8420` valid 24 h, 8 attempts from
    /// 2 s up to 10 min apart, escalation after 15 min.
    pub fn defaults() -> NoticePolicy {
        NoticePolicy {
            public_url: "http://127.0.0.1:8420".to_owned(),
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
    parsing: Arc<ParseGate>,
    /// The directory as last read, with the stamp of the files it came from: access checks run
    /// on every request and change event, and reading the files each time cost more than them.
    directory: Arc<std::sync::Mutex<Option<CachedDirectory>>>,
    /// User SQL: queries at once, and the workers that run them.
    queries: Arc<queries::Queries>,
    /// The pending threads in queue order, while this process follows the home.
    queue: Arc<queue::Queue>,
}

/// The order of every thread listing: work waiting for an executor first, in queue order
/// (urgent first, then the oldest), then the rest, most recently changed first.
pub(crate) fn listing_order(a: &Envelope, b: &Envelope) -> std::cmp::Ordering {
    let waiting = |e: &Envelope| e.status == Status::Pending;
    match (waiting(a), waiting(b)) {
        (true, true) => a.queue_key().cmp(&b.queue_key()),
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        (false, false) => b
            .updated
            .cmp(&a.updated)
            .then(b.thread_ref.cmp(&a.thread_ref)),
    }
}

/// The directory as read, and the stamp of the registry files it was read from.
type CachedDirectory = (
    crate::store::registry::RegistryStamp,
    Arc<directory::Directory>,
);

/// Memory all message parsing of one process may take at once.
const PARSE_BUDGET: usize = 384 * 1024 * 1024;

/// How long a message waits for room to be parsed before it is refused as busy.
const PARSE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

/// What parsing a message of `len` bytes may cost at most (the multiple measured by the parse
/// benchmark, with room to spare): the budget each parse holds while it runs.
fn parse_cost(len: usize) -> usize {
    len.saturating_mul(10).saturating_add(4 * 1024 * 1024)
}

/// A counting gate over [`PARSE_BUDGET`]: a parse waits until its cost fits beside the parses
/// in flight, so many large messages at once queue instead of exhausting memory.
#[derive(Debug, Default)]
struct ParseGate {
    used: std::sync::Mutex<usize>,
    freed: std::sync::Condvar,
}

impl ParseGate {
    /// Waits for room for `cost` and holds it until the guard drops; a cost over the whole
    /// budget waits for the gate to be empty. Waits at most `patience`: a parse that cannot
    /// start by then is refused as busy rather than queued behind others without end.
    fn enter(&self, cost: usize, patience: std::time::Duration) -> Result<ParseGuard<'_>, Error> {
        let cost = cost.min(PARSE_BUDGET);
        let deadline = std::time::Instant::now() + patience;
        let mut used = match self.used.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        while *used + cost > PARSE_BUDGET {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(Error::Busy {
                    message: "the exchange is reading as many large messages as it holds at \
                              once; retry shortly"
                        .to_owned(),
                });
            }
            used = match self.freed.wait_timeout(used, left) {
                Ok((g, _)) => g,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        *used += cost;
        Ok(ParseGuard { gate: self, cost })
    }
}

/// Room held in the [`ParseGate`].
struct ParseGuard<'a> {
    gate: &'a ParseGate,
    cost: usize,
}

impl Drop for ParseGuard<'_> {
    fn drop(&mut self) {
        let mut used = match self.gate.used.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        *used = used.saturating_sub(self.cost);
        self.gate.freed.notify_all();
    }
}

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
            parsing: Arc::new(ParseGate::default()),
            directory: Arc::default(),
            queries: Arc::new(queries::Queries::new(settings_queries)),
            queue,
        }
    }

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
        let Some(changed) = self.store.changed_since(horizon, limit)? else {
            return Ok(None);
        };
        let mut out = Vec::new();
        for (thread, id) in changed {
            if let Ok((envelope, _)) = self.store.envelope(&thread) {
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

    /// Whether `/mcp` sessions are kept where every node finds them (tier 1): then a request
    /// with a session id another node opened continues that session here.
    pub fn shares_mcp_sessions(&self) -> bool {
        self.store.is_shared_by_nodes()
    }

    /// The stored state of `principal`'s `/mcp` session `id` (tier 1; `None` on files).
    pub fn mcp_session(&self, principal: &str, id: &str) -> Result<Option<String>, Error> {
        Ok(self.store.mcp_session(principal, id)?)
    }

    /// Stores the state of `principal`'s `/mcp` session `id` (tier 1; nothing on files).
    pub fn save_mcp_session(&self, principal: &str, id: &str, state: &str) -> Result<(), Error> {
        Ok(self.store.save_mcp_session(principal, id, state)?)
    }

    /// Forgets `principal`'s `/mcp` session `id` (tier 1; nothing on files).
    pub fn drop_mcp_session(&self, principal: &str, id: &str) -> Result<(), Error> {
        Ok(self.store.drop_mcp_session(principal, id)?)
    }

    /// Whether this exchange can serve: always on files; in tier 1, when its database answers.
    pub fn health(&self) -> Result<(), Error> {
        Ok(self.store.ping()?)
    }

    /// Listens to the changes this exchange writes from now on (waits, events, MCP resource
    /// updates). A listener that falls more than a few thousand changes behind gets a `Lagged`
    /// error and should re-read what it watches.
    pub fn subscribe(&self) -> broadcast::Receiver<ThreadChange> {
        self.changes.subscribe()
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

    /// The store underneath.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The current instant, as written into files.
    pub fn now(&self) -> Timestamp {
        time::utc(self.clock.now())
    }

    /// Parses YAML text holding one or more MESS messages (one per document) and submits each,
    /// in order; returns the exchange's answer to each. Stops at the first failure; callers that
    /// must report the answers before it submit [`Exchange::parse_text`]'s messages one by one.
    pub fn submit_text(&self, text: &str, sender: &Sender) -> Result<Vec<Message>, Error> {
        self.parse_text(text)?
            .into_iter()
            .map(|m| self.submit(m, sender))
            .collect()
    }

    /// Parses YAML text holding one or more MESS messages (one per document), checking the size
    /// limit first; nothing is submitted.
    pub fn parse_text(&self, text: &str) -> Result<Vec<Message>, Error> {
        let _room = self.parse_room(text)?;
        self.read_messages(text)
    }

    /// Holds room in the parse budget for `text` (after checking the size limit, so an
    /// oversized text is refused before it waits).
    fn parse_room(&self, text: &str) -> Result<ParseGuard<'_>, Error> {
        if text.len() > self.settings.max_message_bytes {
            return Err(ProtocolError::TooLarge {
                size: text.len(),
                limit: self.settings.max_message_bytes,
            }
            .into());
        }
        self.parsing.enter(parse_cost(text.len()), PARSE_PATIENCE)
    }

    /// [`Exchange::parse_text`] without taking room (the caller holds it).
    fn read_messages(&self, text: &str) -> Result<Vec<Message>, Error> {
        let docs: Vec<_> = yaml::parse_documents(text, &Limits::message(text.len()))
            .map_err(ProtocolError::from)?
            .into_iter()
            .filter(|d| !d.is_null())
            .collect();
        let several = docs.len() > 1;
        let messages = docs
            .into_iter()
            .enumerate()
            .map(|(i, d)| {
                Message::from_value(d).map_err(|e| match e {
                    // With several documents, the path says which one.
                    ProtocolError::Invalid { path, problem } if several => ProtocolError::Invalid {
                        path: format!("document {}: {path}", i + 1),
                        problem,
                    },
                    other => other,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if messages.is_empty() {
            return Err(ProtocolError::invalid("MESS", "the input holds no message").into());
        }
        Ok(messages)
    }

    /// Parses a JSON text (RFC 8259) holding exactly one MESS message, as the API reads bodies
    /// sent as `application/json`: strict JSON, not YAML, so every escape JSON allows (surrogate
    /// pairs included) reads as JSON means it, and an error gives the line and column.
    pub fn parse_json(&self, text: &str) -> Result<Message, Error> {
        let _room = self.parse_room(text)?;
        self.read_json(text)
    }

    /// [`Exchange::parse_json`] without taking room (the caller holds it).
    fn read_json(&self, text: &str) -> Result<Message, Error> {
        let malformed = |e: serde_json::Error| {
            Error::from(ProtocolError::from(yaml::YamlError {
                message: format!("invalid JSON: {e}"),
            }))
        };
        let mut reader = serde_json::Deserializer::from_str(text);
        let value =
            yaml::value_from(&mut reader, &Limits::json_message(text.len())).map_err(malformed)?;
        reader.end().map_err(malformed)?;
        Ok(Message::from_value(value)?)
    }

    /// Parses YAML (or JSON) text holding exactly one MESS message, as the API takes one per
    /// request.
    pub fn parse_one(&self, text: &str) -> Result<Message, Error> {
        let _room = self.parse_room(text)?;
        self.read_one(text)
    }

    /// [`Exchange::parse_one`] without taking room (the caller holds it).
    fn read_one(&self, text: &str) -> Result<Message, Error> {
        let mut messages = self.read_messages(text)?;
        if messages.len() != 1 {
            return Err(ProtocolError::invalid(
                "body",
                format!(
                    "send one MESS message per request (found {} documents)",
                    messages.len()
                ),
            )
            .into());
        }
        Ok(messages.remove(0))
    }

    /// Parses a request body holding one MESS message (strict JSON when `json`, else YAML) and
    /// hands it to `then`, holding the message's room in the parse budget until `then` returns:
    /// the parsed message lives that long, so the budget counts it while it is submitted.
    pub fn take_body<T>(
        &self,
        text: &str,
        json: bool,
        then: impl FnOnce(Message) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let _room = self.parse_room(text)?;
        let message = if json {
            self.read_json(text)?
        } else {
            self.read_one(text)?
        };
        then(message)
    }

    /// Submits one parsed MESS message and returns the exchange's answer (ack, statuses,
    /// query responses).
    pub fn submit(&self, message: Message, sender: &Sender) -> Result<Message, Error> {
        let _heads = HeadMemo::open();
        submit::submit(self, message, sender)
    }

    /// The bounds a query gets unless its caller narrows them: the configured timeout
    /// (`limits.query_timeout`), 1,000 rows, 50,000 characters.
    pub fn query_limits(&self) -> QueryLimits {
        QueryLimits {
            timeout: self.queries.settings().timeout,
            ..QueryLimits::defaults()
        }
    }

    /// Runs one read-only SQL statement over the home's views (after settling overdue and
    /// waiting threads, so the answer matches what `status` shows), in a query worker that
    /// caps its own memory (`limits.query_memory`). With a `viewer`, the statement sees only
    /// the threads that principal may see (see [`query::Scope`]); without one (the operator,
    /// locally) it sees the whole home. Beyond `limits.queries` at once, or
    /// `limits.queries_per_key` for one viewer, it is refused as [`Error::Busy`].
    pub fn query(
        &self,
        sql: &str,
        limits: &QueryLimits,
        viewer: Option<&str>,
    ) -> Result<QueryResult, Error> {
        let _place = self.queries.enter(viewer)?;
        let request = self.query_request(sql, limits, viewer, false)?;
        Ok(self.queries.rows(&request)?)
    }

    /// [`Exchange::query`] with DuckDB's own column types, as an Arrow IPC stream.
    pub fn query_arrow(
        &self,
        sql: &str,
        limits: &QueryLimits,
        viewer: Option<&str>,
    ) -> Result<ArrowAnswer, Error> {
        let _place = self.queries.enter(viewer)?;
        let request = self.query_request(sql, limits, viewer, true)?;
        Ok(self.queries.arrow(&request)?)
    }

    /// What a worker is asked: the statement, its bounds (DuckDB's own memory limit at half
    /// the worker's ceiling, the rest left to values DuckDB builds outside it), and the scope.
    fn query_request(
        &self,
        sql: &str,
        limits: &QueryLimits,
        viewer: Option<&str>,
        arrow: bool,
    ) -> Result<worker::Request, Error> {
        lifecycle::settle_all(self, self.now())?;
        let mut limits = limits.clone();
        limits.duckdb_memory = self.queries.settings().memory / 2;
        Ok(worker::Request {
            home: self.store.layout().root().to_owned(),
            sql: sql.to_owned(),
            limits,
            scope: self.scope_for(viewer),
            arrow,
        })
    }

    /// The thread files `viewer` may see, as a query scope.
    fn scope_for(&self, viewer: Option<&str>) -> query::Scope {
        let Some(who) = viewer else {
            return query::Scope::All;
        };
        let directory = self.directory();
        let root = self.store.layout().root();
        let (listed, _) = self.store.list(&State::ALL, true);
        let visible: Vec<_> = listed
            .into_iter()
            .filter(|(env, _, _)| access::may_see(who, env, &directory))
            .collect();
        let mut accounts: std::collections::HashSet<String> = visible
            .iter()
            .filter(|(env, _, _)| env.extra.contains_key(escrow::ESCROW))
            .map(|(env, _, _)| format!("escrow:{}", env.thread_ref))
            .collect();
        accounts.insert(who.to_owned());
        query::Scope::Threads {
            files: visible
                .into_iter()
                .filter_map(|(_, _, path)| path.strip_prefix(root).ok().map(|p| p.to_owned()))
                .collect(),
            accounts,
        }
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

    /// Expires every pending thread whose `needed_by` has passed and settles pending threads
    /// whose dependencies finished; returns the refs that changed.
    pub fn settle_pending(&self) -> Result<Vec<ThreadRef>, Error> {
        lifecycle::settle_all(self, self.now())
    }

    /// Moves finished and canceled threads last updated more than `older_than` ago to the archive.
    pub fn archive(
        &self,
        older_than: chrono::TimeDelta,
        progress: &mut dyn FnMut(usize, usize),
    ) -> ArchiveReport {
        let cutoff = self.now() - older_than;
        self.store.archive(cutoff, progress)
    }

    /// Checks (and with `repair`, fixes) every thread file.
    pub fn fsck(
        &self,
        repair: bool,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<FsckReport, Error> {
        let report = self.store.fsck(repair, progress)?;
        if repair {
            // With the files and indexes sound again, finish what interrupted writers left:
            // overdue expiries and dependents of threads that reached a final status.
            lifecycle::settle_all(self, self.now())?;
        }
        Ok(report)
    }
}
