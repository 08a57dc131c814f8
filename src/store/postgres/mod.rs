//! PostgreSQL as the system of record (tier 1): the connection pool, error sorting, advisory
//! locks, and the thread operations `Store` delegates to when a database is configured.
//! The node's home then holds a read-only mirror of the thread files, written by `mirror`.

mod ledger;
pub mod mail;
pub mod memo;
pub mod mirror;
pub mod outbox;
pub mod schema;
mod session;
mod shared;
mod threads;
pub mod transfer;
pub mod transfer_shared;

use std::str::FromStr as _;
use std::time::Duration;

use postgres::NoTls;
use postgres::fallible_iterator::FallibleIterator as _;
use sha2::Digest as _;

use crate::store::error::StoreError;

/// A thread as the database holds it.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    /// The whole MESSE-AF text.
    pub text: String,
    /// Where the thread's file lives (in every mirror).
    pub location: crate::store::layout::Location,
    /// Message documents.
    pub seq: i32,
}

/// Connections one node keeps open at most for single statements: enough for the HTTP
/// workers' blocking threads to wait briefly rather than open a connection per request.
const POOL_SIZE: u32 = 16;

/// Connections for transactions that change threads, and for session locks. Each kind has a
/// pool of its own: a transaction (or a lock holder) may need a single-statement connection
/// while it holds its own (a decision reads the directory), and never waits for one of its
/// own kind, so the pools cannot starve each other into a deadlock.
const WRITERS: u32 = 8;
const LOCKERS: u32 = 8;

/// How long a caller waits for a connection before the database counts as unavailable.
const CHECKOUT_WAIT: Duration = Duration::from_secs(5);

/// Session settings of every connection: no statement, lock wait or idle transaction may hold
/// a connection (and the rows it locked) without bound; and no JIT compilation. Our statements
/// touch a few rows each, but the planner's estimate for a pass of the follower (a text per
/// changed thread) passes `jit_above_cost` once the feed holds a few thousand changes, and
/// compiling it cost 100-300 ms per pass (measured), where the pass itself takes 1-2 ms.
const SESSION_OPTIONS: &str = "-c lock_timeout=10s -c statement_timeout=30s \
                               -c idle_in_transaction_session_timeout=30s -c jit=off";

pub(crate) type Conn = r2d2::PooledConnection<session::Manager>;
pub(crate) use session::Run;

/// The channel of the change feed's notifications.
const CHANNEL: &str = "mess_changes";

/// Notifications one node sends at most this often: a NOTIFY inside the writing transaction
/// takes a global lock at commit (measured: 5x fewer writes per second), so each node sends
/// one after commits, coalesced.
const NOTIFY_EVERY: Duration = Duration::from_millis(10);

/// A connection pool to the exchange's database.
#[derive(Clone)]
pub struct Pg {
    pool: r2d2::Pool<session::Manager>,
    writers: r2d2::Pool<session::Manager>,
    lockers: r2d2::Pool<session::Manager>,
    config: postgres::Config,
    signals: std::sync::Arc<Signals>,
    /// This process among the nodes: what its delivery leases name.
    node: String,
    /// The registry's version as last read, and when (see [`Pg::registry_version_recent`]).
    registry_seen: std::sync::Arc<std::sync::Mutex<Option<Seen>>>,
}

/// A version as read, and when.
type Seen = (std::time::Instant, (i64, i64));

/// Wake-ups between this process's writers, its notifier and its mirror follower.
#[derive(Debug, Default)]
struct Signals {
    /// A commit (here or, through LISTEN, on another node) the follower has not seen.
    changed: std::sync::Mutex<bool>,
    changed_cv: std::sync::Condvar,
    /// A commit here that other nodes have not been told of; and whether the notifier runs.
    notify: std::sync::Mutex<(bool, bool)>,
    notify_cv: std::sync::Condvar,
}

pub(crate) fn locked<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl std::fmt::Debug for Pg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password: only where it points is shown.
        f.debug_struct("Pg")
            .field("hosts", &self.config.get_hosts().len())
            .field("dbname", &self.config.get_dbname())
            .finish()
    }
}

impl Pg {
    /// A pool for the database at `url` (`postgres://user@host:port/db`); connects lazily, so a
    /// database that is down now answers later requests with [`StoreError::Unavailable`].
    pub fn open(url: &str) -> Result<Pg, StoreError> {
        let mut config = postgres::Config::from_str(url).map_err(|e| StoreError::Other {
            message: format!("the database URL does not parse: {e}"),
        })?;
        config
            .application_name("mess")
            .connect_timeout(CHECKOUT_WAIT)
            .options(SESSION_OPTIONS);
        let pool_of = |size: u32| {
            r2d2::Pool::builder()
                // A database that is down fails every checkout, which the callers report
                // (503, a warning); r2d2's own log line per attempt would only repeat it.
                .error_handler(Box::new(r2d2::NopErrorHandler))
                .max_size(size)
                .min_idle(Some(0))
                .connection_timeout(CHECKOUT_WAIT)
                .build_unchecked(session::Manager::new(config.clone()))
        };
        let (pool, writers, lockers) = (pool_of(POOL_SIZE), pool_of(WRITERS), pool_of(LOCKERS));
        let tag: String = crate::store::fsio::random_bytes(4)?
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(Pg {
            pool,
            writers,
            lockers,
            config,
            signals: std::sync::Arc::default(),
            node: format!("{}-{tag}", std::process::id()),
            registry_seen: std::sync::Arc::default(),
        })
    }

    /// Records that a write committed: this process's follower wakes now, and other nodes'
    /// followers hear of it through one coalesced NOTIFY.
    pub(crate) fn committed(&self) {
        self.wake();
        let mut notify = locked(&self.signals.notify);
        notify.0 = true;
        if !notify.1 {
            notify.1 = true;
            // The notifier holds neither the pools nor the signals themselves: it ends (and
            // closes its connection) once the last handle of this database is dropped.
            let (signals, config, node) = (
                std::sync::Arc::downgrade(&self.signals),
                self.config.clone(),
                self.node.clone(),
            );
            let spawned = std::thread::Builder::new()
                .name("mess-notify".to_owned())
                .spawn(move || notifier(&signals, &config, &node));
            if spawned.is_err() {
                notify.1 = false;
            }
        }
        self.signals.notify_cv.notify_all();
    }

    /// Wakes this process's follower.
    pub(crate) fn wake(&self) {
        *locked(&self.signals.changed) = true;
        self.signals.changed_cv.notify_all();
    }

    /// Waits until a commit is reported (here or by another node) or `timeout` passes.
    pub fn wait_for_change(&self, timeout: Duration) {
        let guard = locked(&self.signals.changed);
        let (mut changed, _) =
            match self
                .signals
                .changed_cv
                .wait_timeout_while(guard, timeout, |c| !*c)
            {
                Ok(r) => r,
                Err(poisoned) => poisoned.into_inner(),
            };
        *changed = false;
    }

    /// Listens for other nodes' commits on a connection of its own and wakes this process's
    /// follower on each (each notification names the node that sent it), until `stop` is set; a lost connection is opened again after a
    /// second (the follower's own timer covers what is missed meanwhile).
    pub fn listen(&self, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        use std::sync::atomic::Ordering;
        while !stop.load(Ordering::Relaxed) {
            let Ok(mut client) = self.dedicated() else {
                std::thread::sleep(Duration::from_secs(1));
                continue;
            };
            if client.batch_execute(&format!("LISTEN {CHANNEL}")).is_err() {
                std::thread::sleep(Duration::from_secs(1));
                continue;
            }
            // A reconnect may have missed notifications: look once.
            self.wake();
            loop {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let (heard, failed) = {
                    let mut notifications = client.notifications();
                    let mut iter = notifications.timeout_iter(Duration::from_millis(500));
                    match iter.next() {
                        // This process's own commits woke its follower already.
                        Ok(Some(n)) => (n.payload() != self.node, false),
                        Ok(None) => (false, false),
                        Err(_) => (false, true),
                    }
                };
                if heard {
                    self.wake();
                }
                if failed || client.is_closed() {
                    break;
                }
            }
        }
    }

    /// A pooled connection for single statements, or `Unavailable` when none can be had in
    /// time.
    pub(crate) fn conn(&self) -> Result<Conn, StoreError> {
        checkout(&self.pool)
    }

    /// Whether the database answers a trivial statement now.
    pub fn ping(&self) -> Result<(), StoreError> {
        self.conn()?.batch_execute("SELECT 1").map_err(sorted)
    }

    /// A pooled connection for a transaction that changes threads.
    pub(crate) fn writer(&self) -> Result<Conn, StoreError> {
        checkout(&self.writers)
    }

    /// A connection of its own, outside the pool: for `LISTEN` and for session locks held
    /// for a long time.
    pub(crate) fn dedicated(&self) -> Result<postgres::Client, StoreError> {
        with_retries(|| self.config.connect(NoTls)).map_err(sorted)
    }

    /// Takes the session lock `name` on a dedicated connection if nobody holds it; the lock
    /// lives as long as the returned connection (a node that dies frees it at once).
    pub(crate) fn try_session_lock(
        &self,
        name: &str,
    ) -> Result<Option<postgres::Client>, StoreError> {
        let mut client = self.dedicated()?;
        let row = client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&lock_key(name)])
            .map_err(sorted)?;
        Ok(row.get::<_, bool>(0).then_some(client))
    }

    /// Takes the session lock `name` on a pooled connection, waiting for other holders; it is
    /// released when the returned guard drops.
    pub(crate) fn session_lock(&self, name: &str) -> Result<SessionLock, StoreError> {
        let mut conn = checkout(&self.lockers)?;
        let key = lock_key(name);
        conn.execute("SELECT pg_advisory_lock($1)", &[&key])
            .map_err(sorted)?;
        Ok(SessionLock {
            conn: Some(conn),
            key,
        })
    }
}

/// Sends one NOTIFY per burst of commits, at most every [`NOTIFY_EVERY`], for as long as a
/// handle of the database lives (`signals` is then gone, and the loop ends within a second); a
/// lost connection is opened again at the next commit.
fn notifier(signals: &std::sync::Weak<Signals>, config: &postgres::Config, node: &str) {
    let mut client: Option<postgres::Client> = None;
    loop {
        let Some(signals) = signals.upgrade() else {
            return;
        };
        {
            let guard = locked(&signals.notify);
            let mut pending =
                match signals
                    .notify_cv
                    .wait_timeout_while(guard, Duration::from_secs(1), |n| !n.0)
                {
                    Ok((g, _)) => g,
                    Err(poisoned) => poisoned.into_inner().0,
                };
            if !pending.0 {
                continue;
            }
            pending.0 = false;
        }
        drop(signals);
        if client.as_ref().is_none_or(postgres::Client::is_closed) {
            client = with_retries(|| config.connect(NoTls)).ok();
        }
        if let Some(c) = client.as_mut()
            // The node's name is digits, a dash and hex: nothing to quote.
            && c.batch_execute(&format!("NOTIFY {CHANNEL}, '{node}'")).is_err()
        {
            client = None;
        }
        std::thread::sleep(NOTIFY_EVERY);
    }
}

fn checkout(pool: &r2d2::Pool<session::Manager>) -> Result<Conn, StoreError> {
    // The pool tries to connect until its wait is over; its error carries the last refusal
    // in `describe`'s words (see `session::ConnectError`).
    pool.get().map_err(|e| StoreError::Unavailable {
        message: format!("no database connection: {e}"),
    })
}

/// A session-level advisory lock on a pooled connection, released on drop.
pub(crate) struct SessionLock {
    conn: Option<Conn>,
    key: i64,
}

impl std::fmt::Debug for SessionLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionLock")
            .field("key", &self.key)
            .finish()
    }
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        if let Some(mut conn) = self.conn.take()
            && conn
                .execute("SELECT pg_advisory_unlock($1)", &[&self.key])
                .is_err()
        {
            // The lock could still be held by this session: the connection must not go back
            // to the pool, or its next user would hold it too. Closing it frees the lock.
            let _ = conn.close_hint();
        }
    }
}

/// Hint for the pool that a connection is not to be reused.
trait CloseHint {
    fn close_hint(&mut self) -> Result<(), StoreError>;
}

impl CloseHint for Conn {
    fn close_hint(&mut self) -> Result<(), StoreError> {
        // r2d2 checks `has_broken` on return; an explicit terminate of our own backend makes
        // the connection broken, so the pool drops it.
        self.batch_execute("SELECT pg_terminate_backend(pg_backend_pid())")
            .map_err(sorted)
    }
}

/// The advisory-lock key of `name`: the first eight bytes of its SHA-256, so names of
/// different kinds (`sender:…`, `singleton:…`) never share a key by accident.
pub(crate) fn lock_key(name: &str) -> i64 {
    let digest = sha2::Sha256::digest(name.as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(bytes)
}

/// Sorts a database error: connection failures, shutdowns and lock waits that ran out are
/// `Unavailable` (retry later); anything else is an internal error, said in words.
pub(crate) fn sorted(e: postgres::Error) -> StoreError {
    let transient = e.is_closed()
        || e.code().is_none_or(|code| {
            let code = code.code();
            // 08: connection exceptions; 57P: operator intervention (shutdown, starting up);
            // 55P03: lock not available; 53: insufficient resources; 40: serialization.
            code.starts_with("08")
                || code.starts_with("57P")
                || code.starts_with("53")
                || code.starts_with("40")
                || code == "55P03"
        });
    if transient {
        StoreError::Unavailable {
            message: format!("the database is unavailable: {}", describe(&e)),
        }
    } else {
        StoreError::Other {
            message: format!("database: {}", describe(&e)),
        }
    }
}

/// What PostgreSQL said, in words: its severity, message and SQLSTATE for an error the server
/// reported (`FATAL: sorry, too many clients already (SQLSTATE 53300)`), else the client's
/// error with its causes (a refused connection, a closed socket). Never a bare `db error`.
pub(crate) fn describe(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = format!(
            "{}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        );
        if let Some(detail) = db.detail() {
            text.push_str(&format!("; {detail}"));
        }
        return text;
    }
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let said = c.to_string();
        if !text.contains(&said) {
            text.push_str(&format!(": {said}"));
        }
        cause = c.source();
    }
    text
}

/// Whether PostgreSQL refused a statement or a connection in a way that changed nothing and
/// passes by itself: a serialization failure or deadlock (the statement was rolled back), a lock
/// not had in time, too many connections or the server starting up. Such an error is retried
/// here, briefly, before it reaches anyone.
fn retryable(e: &postgres::Error) -> bool {
    matches!(
        e.code().map(postgres::error::SqlState::code),
        Some("40001" | "40P01" | "55P03" | "53300" | "53400" | "57P03")
    )
}

/// How long a statement or connection refused for a [`retryable`] reason is tried again.
const RETRY_FOR: Duration = Duration::from_secs(8);

/// Runs `op` (one statement outside a transaction, or opening a connection) again while
/// PostgreSQL refuses it for a [`retryable`] reason, with growing, jittered pauses, for at most
/// [`RETRY_FOR`]; then its last error stands.
pub(crate) fn with_retries<T>(
    mut op: impl FnMut() -> Result<T, postgres::Error>,
) -> Result<T, postgres::Error> {
    let until = std::time::Instant::now() + RETRY_FOR;
    let mut pause = Duration::from_millis(10);
    loop {
        match op() {
            Err(e) if retryable(&e) && std::time::Instant::now() + pause < until => {
                // Several processes refused at once should not come back at once.
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_nanos());
                let jitter = Duration::from_nanos(u64::from(nanos) % (pause.as_nanos() as u64 + 1));
                std::thread::sleep(pause + jitter);
                pause = (pause * 2).min(Duration::from_millis(500));
            }
            other => return other,
        }
    }
}
