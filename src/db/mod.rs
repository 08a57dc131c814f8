//! The embedded DuckDB read model: `read_yaml_auto` registered, the macros and views of
//! `macros/` and `sql/` loaded over one exchange home, and the typed reads the exchange needs
//! (routing). It never writes a thread: deleting it loses nothing, the files are the truth.

pub mod assets;
pub mod error;
pub mod query;
mod snapshot;
pub mod worker;

#[cfg(test)]
mod prop_tests;
#[cfg(test)]
mod query_tests;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use duckdb::Connection;

use crate::db::error::DbError;
use crate::protocol::time::{self, Timestamp};

/// An executor chosen for a request by `route_request`, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Routed {
    /// The executor id.
    pub executor: String,
    /// The rule or reason that chose it.
    pub reason: String,
}

/// One request to route: what `route_batch` takes per entry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RouteWanted {
    /// The thread it belongs to (carried through for the caller; routing ignores it).
    pub thread: String,
    /// Required capabilities: ids, or JSON text of `{id: metadata}` for those whose metadata
    /// the executor's must satisfy.
    pub requires: Vec<String>,
    /// The request's precision.
    pub precision: Option<String>,
    /// The request's urgency.
    pub urgency: Option<String>,
    /// The request's `constraints.location`: a place path, free text or an area.
    pub location: Option<serde_json::Value>,
    /// The request's `constraints.environment`.
    pub environment: Vec<String>,
}

/// An executor as routing reads it: checked by the exchange, so nothing in it can make a
/// routing statement fail.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ExecutorRow {
    /// The executor id.
    pub id: String,
    /// The capability ids it offers.
    pub capabilities: Vec<String>,
    /// `always`, `schedule` or `on_demand`.
    pub availability: String,
    /// The cron schedule, when availability is `schedule`.
    pub schedule: Option<String>,
    /// The time zone the schedule is read in (a `time_zones` zone).
    pub timezone: String,
    /// Metadata of the capabilities that carry any, by id (the first entry of an id).
    pub capability_meta: serde_json::Map<String, serde_json::Value>,
    /// The place paths it reaches.
    pub access: Vec<String>,
    /// Where it works: a place path or an area.
    pub location: Option<serde_json::Value>,
    /// The conditions it works in.
    pub environment: Vec<String>,
}

/// A routing rule as routing reads it (the columns of the `routing_rules` view).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RuleRow {
    /// 1-based position in the rule list.
    pub position: i64,
    /// The `default` rule (no `match`).
    pub is_default: bool,
    /// `match.capability`.
    pub match_capability: Option<String>,
    /// `match.urgency`.
    pub match_urgency: Option<String>,
    /// `match.precision`.
    pub match_precision: Option<String>,
    /// Other `match` keys (such a rule never matches).
    pub match_unsupported: Vec<String>,
    /// Preferred executor ids, in order.
    pub prefer: Vec<String>,
    /// A strategy word instead of executor ids.
    pub strategy: Option<String>,
}

/// What routing decides over: the executors and rules in effect, as the exchange read and
/// checked them (entries with problems are left out and reported there).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoutingDirectory {
    /// The executors.
    pub executors: Vec<ExecutorRow>,
    /// The rules, in order.
    pub rules: Vec<RuleRow>,
}

/// A DuckDB instance with every view and macro over one home.
pub struct Db {
    con: Mutex<Connection>,
    home: PathBuf,
    /// What the routing snapshot was taken from, and when.
    snapshot: Mutex<Option<snapshot::Taken>>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("home", &self.home)
            .finish_non_exhaustive()
    }
}

/// Opens an in-memory DuckDB with no network access for extensions, `read_yaml_auto` (within
/// `confine` when given), and the assets over `home`.
pub(crate) fn open_instance(
    home: &Path,
    confine: Option<&yaml_scan::Confinement>,
) -> Result<Connection, DbError> {
    // A query worker's instance (the confined one) starts with one thread and one thread for
    // I/O tasks: DuckDB starts 4 I/O threads per core at open (8 here), each with an 8 MiB
    // stack that counts against the worker's memory ceiling (64 MiB of a 256 MiB ceiling),
    // and the worker reads no remote files.
    let opened = match confine {
        Some(_) => duckdb::Config::default()
            .threads(1)
            .and_then(|c| c.with("async_threads", "1"))
            .and_then(Connection::open_in_memory_with_flags),
        None => Connection::open_in_memory(),
    };
    let con = opened.map_err(|e| DbError::duckdb("opening DuckDB", e))?;
    // A missing extension must fail at once, not try to download.
    con.execute_batch(
        "SET autoinstall_known_extensions = false; SET autoload_known_extensions = false;",
    )
    .map_err(|e| DbError::duckdb("configuring DuckDB", e))?;
    let registered = match confine {
        Some(c) => yaml_scan::register_within(&con, c),
        None => yaml_scan::register(&con),
    };
    registered.map_err(|e| DbError::duckdb("registering read_yaml_auto", e))?;
    yaml_scan::register_scalars(&con)
        .map_err(|e| DbError::duckdb("registering yaml_to_json", e))?;
    // A confined instance reads relative patterns from its root, so its assets name no path.
    let rendered = match confine {
        Some(_) => assets::render_relative(),
        None => assets::render(&home.to_string_lossy()),
    };
    yaml_scan::defining(|| {
        for (name, sql) in rendered {
            con.execute_batch(&sql)
                .map_err(|e| DbError::duckdb(name, e))?;
        }
        Ok::<_, DbError>(())
    })?;
    Ok(con)
}

impl Db {
    /// Opens the read model of the home at `home`.
    pub fn open(home: &Path) -> Result<Db, DbError> {
        Ok(Db {
            con: Mutex::new(open_instance(home, None)?),
            home: home.to_owned(),
            snapshot: Mutex::new(None),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        match self.con.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Runs a statement on the read model and returns every row as text (for tools and
    /// benchmarks; user queries go through the locked-down `query` instance instead).
    pub fn rows(&self, sql: &str) -> Result<Vec<Vec<Option<String>>>, DbError> {
        let con = self.lock();
        let mut stmt = con
            .prepare(&format!("SELECT COLUMNS(*)::VARCHAR FROM ({sql})"))
            .map_err(|e| DbError::duckdb(sql.to_owned(), e))?;
        let mut rows = stmt
            .query([])
            .map_err(|e| DbError::duckdb(sql.to_owned(), e))?;
        let mut out = Vec::new();
        while let Some(row) = rows
            .next()
            .map_err(|e| DbError::duckdb(sql.to_owned(), e))?
        {
            let n = row.as_ref().column_count();
            out.push(
                (0..n)
                    .map(|i| row.get::<_, Option<String>>(i))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| DbError::duckdb(sql.to_owned(), e))?,
            );
        }
        Ok(out)
    }

    /// The executors a new request goes to (`route_for`, the body of `route_request`), best
    /// first, over `directory` (or, without one, the directory views).
    pub fn route(
        &self,
        requires: &[String],
        precision: Option<&str>,
        urgency: Option<&str>,
        at: &Timestamp,
        directory: Option<&RoutingDirectory>,
    ) -> Result<Vec<Routed>, DbError> {
        let wanted = RouteWanted {
            requires: requires.to_vec(),
            precision: precision.map(str::to_owned),
            urgency: urgency.map(str::to_owned),
            ..RouteWanted::default()
        };
        self.route_wanted(&wanted, at, directory)
    }

    /// The executors one request goes to (`route_for`), best first, over `directory` (or,
    /// without one, the directory views).
    pub fn route_wanted(
        &self,
        wanted: &RouteWanted,
        at: &Timestamp,
        directory: Option<&RoutingDirectory>,
    ) -> Result<Vec<Routed>, DbError> {
        Ok(self
            .route_batch(std::slice::from_ref(wanted), at, directory)?
            .pop()
            .unwrap_or_default())
    }

    /// Routes many requests in one statement (`route_batch`): binding the routing SQL costs
    /// tens of milliseconds, running it for one more request almost nothing. Returns each
    /// request's executors, best first, in the order of `wanted`. Routing reads `directory`
    /// when given (the exchange passes the executors and rules it checked, so no entry can
    /// make the statement fail), else the directory views as they are.
    pub fn route_batch(
        &self,
        wanted: &[RouteWanted],
        at: &Timestamp,
        directory: Option<&RoutingDirectory>,
    ) -> Result<Vec<Vec<Routed>>, DbError> {
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let reqs: Vec<serde_json::Value> = wanted
            .iter()
            .map(|w| {
                serde_json::json!({
                    "ref": w.thread,
                    "requires": w.requires,
                    "precision": w.precision,
                    "urgency": w.urgency,
                    "location": w.location,
                    "environment": w.environment,
                })
            })
            .collect();
        let reqs = serde_json::Value::Array(reqs).to_string();
        let con = self.lock();
        let key = snapshot::key(&self.home, directory);
        let mut taken = match self.snapshot.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let what = snapshot::refresh_for(taken.as_ref(), &key, at);
        if what.any() {
            // A snapshot left half taken by a failure is taken whole next time.
            *taken = None;
            snapshot::refresh(&con, at, directory, what)?;
            *taken = Some(snapshot::Taken::new(key, at));
        }
        drop(taken);
        con.execute_batch("SET search_path = 'snap,main'")
            .map_err(|e| DbError::duckdb("routing", e))?;
        let routed = Self::run_route_batch(&con, &reqs, at, wanted.len());
        // Every other statement on this connection reads the live views.
        con.execute_batch("SET search_path = 'main'")
            .map_err(|e| DbError::duckdb("routing", e))?;
        routed
    }

    fn run_route_batch(
        con: &Connection,
        reqs: &str,
        at: &Timestamp,
        count: usize,
    ) -> Result<Vec<Vec<Routed>>, DbError> {
        let mut routed = vec![Vec::new(); count];
        let mut stmt = con
            .prepare(
                "SELECT i, executor, reason FROM route_batch(from_json(?::JSON, \
                 '[{\"ref\":\"VARCHAR\",\"requires\":[\"VARCHAR\"],\"precision\":\"VARCHAR\",\"urgency\":\"VARCHAR\",\
                 \"location\":\"JSON\",\"environment\":[\"VARCHAR\"]}]'), \
                 ?::TIMESTAMPTZ) ORDER BY i, rank",
            )
            .map_err(|e| DbError::duckdb("route_batch", e))?;
        let rows = stmt
            .query_map(duckdb::params![reqs, time::format_timestamp(at)], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    Routed {
                        executor: row.get(1)?,
                        reason: row.get(2)?,
                    },
                ))
            })
            .map_err(|e| DbError::duckdb("route_batch", e))?;
        for row in rows {
            let (i, r) = row.map_err(|e| DbError::duckdb("route_batch", e))?;
            if let Some(slot) = usize::try_from(i - 1).ok().and_then(|i| routed.get_mut(i)) {
                slot.push(r);
            }
        }
        Ok(routed)
    }
}
