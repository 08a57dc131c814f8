//! User SQL out of the server's process: a limiter (queries at once, in total and per key)
//! and a pool of long-lived query workers (`mess query-worker`), each capping its own memory
//! before it reads anything. A query that allocates without bound ends at its worker's
//! ceiling, not the server's; a worker that dies or overstays its timeout is killed, reported
//! and replaced. One value per exchange, shared by its clones.
//!
//! Workers are kept between queries because `read_yaml_auto`'s parse cache lives in the
//! process: a fresh worker per query would parse every file again (see the `sql` benchmark).

use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, mpsc};
use std::time::{Duration, Instant};

use crate::db::error::DbError;
use crate::db::query::{self, QueryLimits};
use crate::db::query::{ARROW_MAX_BYTES, ArrowAnswer, QueryResult};
use crate::db::worker::{self, Failure, Reply, Request};
use crate::exchange::error::Error;
use crate::exchange::{Exchange, access, escrow, lifecycle};
use crate::protocol::status::State;

/// User SQL over the read model: limits, scopes and the answer formats.
#[derive(Clone, Copy)]
pub struct Sql<'a> {
    pub(super) ex: &'a Exchange,
}

impl Exchange {
    /// User SQL over the read model.
    pub fn sql(&self) -> Sql<'_> {
        Sql { ex: self }
    }
}

/// How queries run (`limits:` in config.yaml, and the worker program the CLI names).
#[derive(Debug, Clone)]
pub struct QuerySettings {
    /// The program started as `PROGRAM query-worker` (the `mess` binary; the CLI passes its
    /// own path). Without one, queries are refused: they never run in the exchange's process.
    pub worker: Option<PathBuf>,
    /// `HOME` for workers, so `~` in `read_yaml_auto` patterns means what it means to the
    /// operator; workers get no other environment.
    pub user_home: Option<PathBuf>,
    /// Memory ceiling of one worker, in bytes (`limits.query_memory`).
    pub memory: u64,
    /// Queries at once in this process (`limits.queries`): at most this many workers.
    pub total: usize,
    /// Queries at once for one key (`limits.queries_per_key`).
    pub per_key: usize,
    /// Longest run of one query before it is interrupted (`limits.query_timeout`).
    pub timeout: Duration,
    /// How long an interrupted query's worker gets to stop before it is killed
    /// (`limits.query_grace`).
    pub grace: Duration,
}

impl QuerySettings {
    /// The documented defaults: no worker program, 256 MiB per query, 4 queries at once and
    /// 2 per key, 10 s per query, 5 s of grace.
    pub fn defaults() -> QuerySettings {
        QuerySettings {
            worker: None,
            user_home: None,
            memory: 256 * 1024 * 1024,
            total: 4,
            per_key: 2,
            timeout: Duration::from_secs(10),
            grace: Duration::from_secs(5),
        }
    }

    fn ceiling_mib(&self) -> u64 {
        self.memory / (1024 * 1024)
    }
}

/// Queries a worker answers before it is replaced (its memory starts afresh; the parse cache
/// is refilled once).
const MAX_SERVED: usize = 1000;

/// The limiter and the idle workers of one exchange.
#[derive(Debug)]
pub(crate) struct Queries {
    settings: QuerySettings,
    running: Mutex<Running>,
    idle: Mutex<Vec<Worker>>,
}

/// Queries running now.
#[derive(Debug, Default)]
struct Running {
    total: usize,
    per_key: HashMap<String, usize>,
}

/// A query's place within the limits, given back when dropped.
pub(crate) struct Permit<'a> {
    queries: &'a Queries,
    key: String,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut running = self.queries.running();
        running.total = running.total.saturating_sub(1);
        if let Some(n) = running.per_key.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                running.per_key.remove(&self.key);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl Queries {
    pub(crate) fn new(settings: QuerySettings) -> Queries {
        Queries {
            settings,
            running: Mutex::default(),
            idle: Mutex::default(),
        }
    }

    pub(crate) fn settings(&self) -> &QuerySettings {
        &self.settings
    }

    fn running(&self) -> MutexGuard<'_, Running> {
        lock(&self.running)
    }

    /// Queries running now (for `/metrics`).
    pub(crate) fn busy(&self) -> usize {
        self.running().total
    }

    /// Takes a place for one query of `key` (a principal, or `None` for the operator), or
    /// says why there is none: nothing waits, the caller retries.
    pub(crate) fn enter(&self, key: Option<&str>) -> Result<Permit<'_>, Error> {
        let key = key.unwrap_or("").to_owned();
        let mut running = self.running();
        let mine = running.per_key.get(&key).copied().unwrap_or(0);
        if mine >= self.settings.per_key {
            return Err(Error::Busy {
                message: format!(
                    "too many queries at once: this key already runs {mine} (the limit per key); retry when one has finished"
                ),
            });
        }
        if running.total >= self.settings.total {
            return Err(Error::Busy {
                message: format!(
                    "too many queries at once: the server already runs {} (its limit); retry in a moment",
                    running.total
                ),
            });
        }
        running.total += 1;
        *running.per_key.entry(key.clone()).or_default() += 1;
        Ok(Permit { queries: self, key })
    }

    /// Runs a row request in a worker.
    pub(crate) fn rows(&self, request: &Request) -> Result<QueryResult, DbError> {
        match self.run(request)? {
            (Reply::Rows(result), _) => {
                log_problems(&result.problems);
                Ok(result)
            }
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Runs an Arrow request in a worker.
    pub(crate) fn arrow(&self, request: &Request) -> Result<ArrowAnswer, DbError> {
        match self.run(request)? {
            (Reply::Arrow(done), ipc) => {
                log_problems(&done.problems);
                Ok(ArrowAnswer {
                    ipc,
                    truncated: done.truncated,
                })
            }
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Sends `request` to an idle worker (or a new one) and reads its answer; a worker that
    /// answered properly goes back to the idle ones, any other is killed.
    fn run(&self, request: &Request) -> Result<(Reply, Vec<u8>), DbError> {
        let mut worker = self.take()?;
        let deadline = request.limits.timeout + self.settings.grace;
        let mut outcome = worker.ask(request, deadline);
        if let Err(Ended::Unsent(_)) = outcome {
            // An idle worker that ended since it was last checked: the request never reached
            // it, so a fresh worker gets it.
            drop(worker);
            worker = Worker::start(&self.settings)?;
            outcome = worker.ask(request, deadline);
        }
        match outcome {
            Ok((Reply::Failed(failure), _)) => {
                // After an allocation failed, the worker's heap is not trusted with the next
                // query: a fresh one takes its place.
                if failure != Failure::OutOfMemory {
                    self.give_back(worker);
                }
                Err(failure.into_error(self.settings.ceiling_mib()))
            }
            Ok(answer) => {
                self.give_back(worker);
                Ok(answer)
            }
            Err(ended) => {
                let error = worker.ended(ended, request.limits.timeout, &self.settings);
                drop(worker);
                Err(error)
            }
        }
    }

    /// An idle worker that is still alive, or a new one.
    fn take(&self) -> Result<Worker, DbError> {
        loop {
            let Some(mut worker) = lock(&self.idle).pop() else {
                return Worker::start(&self.settings);
            };
            if worker.alive() {
                return Ok(worker);
            }
        }
    }

    fn give_back(&self, worker: Worker) {
        if worker.served >= MAX_SERVED {
            return;
        }
        let mut idle = lock(&self.idle);
        if idle.len() < self.settings.total {
            idle.push(worker);
        }
    }
}

fn log_problems(problems: &[String]) {
    for p in problems {
        tracing::warn!(problem = %p, "a query ran past a problem in the exchange's files");
    }
}

fn unexpected(reply: &Reply) -> DbError {
    DbError::Worker {
        message: format!("answered a request with {reply:?}"),
    }
}

/// Why a worker gave no proper answer.
#[derive(Debug)]
enum Ended {
    /// The request could not be written: the worker was gone before it got it.
    Unsent(String),
    /// Its output ended or broke (it exited or was killed).
    Gone(String),
    /// It sent something the protocol does not allow.
    Garbled(String),
}

/// What the reader tells a worker's watchdog.
enum Signal {
    /// The statement started: its own deadline begins.
    Started,
    /// The answer is in (or the worker is gone).
    Done,
}

/// One `mess query-worker` process and the pipes to it.
#[derive(Debug)]
struct Worker {
    child: Arc<Mutex<Child>>,
    input: BufWriter<ChildStdin>,
    output: BufReader<ChildStdout>,
    served: usize,
    /// Set when the watchdog killed it for overstaying a deadline.
    killed: Arc<AtomicBool>,
}

impl Worker {
    fn start(settings: &QuerySettings) -> Result<Worker, DbError> {
        let program = settings.worker.as_ref().ok_or_else(|| DbError::Worker {
            message: "no worker program is configured, and queries never run in the exchange's own process".to_owned(),
        })?;
        let mut command = Command::new(program);
        // No inherited environment: nothing of the server's (secrets, tokens) is in a worker.
        command
            .arg("query-worker")
            .arg("--memory")
            .arg(settings.memory.to_string())
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(home) = &settings.user_home {
            command.env("HOME", home);
        }
        let mut child = command.spawn().map_err(|e| DbError::Worker {
            message: format!("cannot start {}: {e}", program.display()),
        })?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(DbError::Worker {
                message: "started without pipes".to_owned(),
            });
        };
        Ok(Worker {
            child: Arc::new(Mutex::new(child)),
            input: BufWriter::new(input),
            output: BufReader::new(output),
            served: 0,
            killed: Arc::new(AtomicBool::new(false)),
        })
    }

    fn alive(&mut self) -> bool {
        matches!(lock(&self.child).try_wait(), Ok(None))
    }

    /// Sends one request and reads the answer. The worker is killed if it has not started
    /// the statement within `allowance` (opening DuckDB, checking the statement), or not
    /// answered within `allowance` after it started: the query's timeout plus a grace period
    /// to stop once interrupted.
    fn ask(&mut self, request: &Request, allowance: Duration) -> Result<(Reply, Vec<u8>), Ended> {
        self.served += 1;
        let (signal, signals) = mpsc::channel::<Signal>();
        let child = self.child.clone();
        let killed = self.killed.clone();
        let watchdog = std::thread::spawn(move || {
            let mut deadline = Instant::now() + allowance;
            loop {
                match signals.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                    Ok(Signal::Started) => deadline = Instant::now() + allowance,
                    Ok(Signal::Done) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        killed.store(true, Ordering::SeqCst);
                        let _ = lock(&child).kill();
                        return;
                    }
                }
            }
        });
        let answer = self.exchange(request, &signal);
        let _ = signal.send(Signal::Done);
        let _ = watchdog.join();
        answer
    }

    fn exchange(
        &mut self,
        request: &Request,
        signal: &mpsc::Sender<Signal>,
    ) -> Result<(Reply, Vec<u8>), Ended> {
        let gone = |e: std::io::Error| Ended::Gone(e.to_string());
        let unsent = |e: std::io::Error| Ended::Unsent(e.to_string());
        let text = serde_json::to_vec(request).map_err(|e| Ended::Garbled(e.to_string()))?;
        worker::write_frame(&mut self.input, worker::REQUEST, &text).map_err(unsent)?;
        self.input.flush().map_err(unsent)?;
        let mut data = Vec::new();
        loop {
            let frame = worker::read_frame(&mut self.output, worker::MAX_REPLY_BYTES);
            match frame {
                Ok(Some((worker::STARTED, _))) => {
                    let _ = signal.send(Signal::Started);
                }
                Ok(Some((worker::DATA, bytes))) => {
                    // An Arrow answer within its cap, plus room for the stream's own framing.
                    if data.len() + bytes.len() > ARROW_MAX_BYTES + 4 * 1024 * 1024 {
                        return Err(Ended::Garbled(
                            "sent more Arrow data than the cap allows".to_owned(),
                        ));
                    }
                    data.extend_from_slice(&bytes);
                }
                Ok(Some((worker::REPLY, bytes))) => {
                    let reply: Reply = serde_json::from_slice(&bytes)
                        .map_err(|e| Ended::Garbled(format!("an unreadable reply: {e}")))?;
                    return Ok((reply, data));
                }
                Ok(Some((kind, _))) => {
                    return Err(Ended::Garbled(format!("a frame of unknown kind {kind}")));
                }
                Ok(None) => return Err(Ended::Gone("its output ended".to_owned())),
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    return Err(Ended::Garbled(e.to_string()));
                }
                Err(e) => return Err(gone(e)),
            }
        }
    }

    /// The error for a worker that gave no proper answer (it is killed and reaped first).
    fn ended(&mut self, ended: Ended, timeout: Duration, settings: &QuerySettings) -> DbError {
        let status = {
            let mut child = lock(&self.child);
            let _ = child.kill();
            child.wait().ok()
        };
        if self.killed.load(Ordering::SeqCst) {
            tracing::warn!(
                timeout_s = timeout.as_secs(),
                "a query worker did not stop after its query's timeout and was killed"
            );
            return DbError::Timeout {
                seconds: timeout.as_secs(),
            };
        }
        match ended {
            Ended::Garbled(why) => DbError::Worker {
                message: format!("broke the protocol: {why}"),
            },
            Ended::Gone(why) | Ended::Unsent(why) => {
                let status = status.map_or_else(|| "unknown status".to_owned(), |s| s.to_string());
                tracing::warn!(%status, %why, "a query worker ended during a query");
                DbError::WorkerDied {
                    status,
                    ceiling_mib: settings.ceiling_mib(),
                }
            }
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // An idle worker would leave on its own once its input closes; killing it here makes
        // sure no process outlives its pool and none is left unreaped.
        let mut child = lock(&self.child);
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Sql<'_> {
    /// The bounds a query gets unless its caller narrows them: the configured timeout
    /// (`limits.query_timeout`), 1,000 rows, 50,000 characters.
    pub fn query_limits(&self) -> QueryLimits {
        QueryLimits {
            timeout: self.ex.queries.settings().timeout,
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
        let _place = self.ex.queries.enter(viewer)?;
        let request = self.query_request(sql, limits, viewer, false)?;
        let started = std::time::Instant::now();
        let rows = self.ex.queries.rows(&request);
        crate::exchange::telemetry::query(rows.is_ok(), started.elapsed());
        Ok(rows?)
    }

    /// [`Sql::query`] with DuckDB's own column types, as an Arrow IPC stream.
    pub fn query_arrow(
        &self,
        sql: &str,
        limits: &QueryLimits,
        viewer: Option<&str>,
    ) -> Result<ArrowAnswer, Error> {
        let _place = self.ex.queries.enter(viewer)?;
        let request = self.query_request(sql, limits, viewer, true)?;
        let started = std::time::Instant::now();
        let answer = self.ex.queries.arrow(&request);
        crate::exchange::telemetry::query(answer.is_ok(), started.elapsed());
        Ok(answer?)
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
        lifecycle::settle_all(self.ex, self.ex.now())?;
        let mut limits = limits.clone();
        limits.duckdb_memory = self.ex.queries.settings().memory / 2;
        Ok(worker::Request {
            home: self.ex.store.layout().root().to_owned(),
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
        let directory = self.ex.directory();
        let root = self.ex.store.layout().root();
        let (listed, _) = self.ex.store.list(&State::ALL, true);
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
}
