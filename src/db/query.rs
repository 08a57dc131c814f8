//! Read-only SQL for people and agents (`mess query`, `/query`, `mess_query`): a dedicated
//! DuckDB instance per query with no file or network access of its own (its views rendered with
//! patterns relative to the home, DuckDB's path settings pointed nowhere), `read_yaml_auto`
//! confined to the home, key holders' directory views as snapshots, one SELECT-shaped statement
//! that names no catalog function, table or schema, row, character and Arrow size caps, and a
//! timeout. This is the engine a query worker runs (`worker`); the exchange
//! never runs it in its own process, where a query's memory would be the server's.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use arrow::error::ArrowError;
use arrow::ipc::writer::StreamWriter;
use duckdb::Connection;
use duckdb::arrow::array::{Array, StringArray};
use duckdb::arrow::record_batch::RecordBatch;

use crate::db::error::DbError;
use crate::db::open_instance;

/// Bounds on one query.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct QueryLimits {
    /// Most rows returned; more set `truncated`.
    pub max_rows: usize,
    /// Longest run before the query is interrupted.
    pub timeout: Duration,
    /// Most characters of output; rows are dropped from the end to fit.
    pub max_chars: usize,
    /// DuckDB's own memory limit (its buffer manager: tables, joins, sorts). Values built
    /// outside it (long strings, lists, JSON) are bounded by the worker's memory ceiling.
    pub duckdb_memory: u64,
}

impl QueryLimits {
    /// The documented defaults: 1,000 rows, 10 s, 50,000 characters, and 128 MiB for DuckDB
    /// (half of the default worker ceiling; the exchange sets it from `limits.query_memory`).
    pub fn defaults() -> QueryLimits {
        QueryLimits {
            max_rows: 1000,
            timeout: Duration::from_secs(10),
            max_chars: 50_000,
            duckdb_memory: 128 * 1024 * 1024,
        }
    }
}

/// A query's answer: column names, rows of text cells (NULL as `None`), and rows of JSON
/// objects (`to_json` of each row, nested values intact).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct QueryResult {
    /// Column names, in order.
    pub columns: Vec<String>,
    /// Cells as text.
    pub rows: Vec<Vec<Option<String>>>,
    /// Each row as a JSON object.
    pub json_rows: Vec<String>,
    /// True when rows were left out (row cap or output cap).
    pub truncated: bool,
    /// Why rows were left out, for people.
    pub warning: Option<String>,
    /// What the query ran past without failing (a directory view that could not be built and
    /// answered empty): for the server's log, not for the caller.
    pub problems: Vec<String>,
}

/// Which threads a query sees.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum Scope {
    /// Every file of the home (the operator: the CLI, local tools).
    All,
    /// Only these thread files (paths relative to the home), for a principal who may see
    /// only their own threads. The directory views (executors without their `notify`
    /// targets, routing rules, capabilities, availability) are answered from a snapshot taken
    /// before the narrowing, and so are `ledger` and `balances`, cut to the movements and
    /// balances of `accounts` (the principal's own, and the escrows of its threads); every
    /// other file of the home is absent.
    Threads {
        /// The thread files it may read.
        files: HashSet<PathBuf>,
        /// The shells accounts it may see.
        accounts: HashSet<String>,
    },
}

/// The shells views a scoped query keeps, cut to its accounts (`{accounts}`, a SQL list).
/// `balances` is taken over the whole ledger first, so an account's balance is exact.
const SHELLS: &[(&str, &str)] = &[
    (
        "balances",
        "SELECT * FROM balances WHERE account IN ({accounts})",
    ),
    (
        "ledger",
        "SELECT * FROM ledger WHERE \"from\" IN ({accounts}) OR \"to\" IN ({accounts})",
    ),
];

/// The directory views a scoped query keeps, as snapshots; `executors` loses `notify`, which
/// holds people's contact details. In dependency order: later ones read earlier snapshots.
const SNAPSHOTS: &[(&str, &str)] = &[
    ("executors", "SELECT * EXCLUDE (notify) FROM executors"),
    ("routing_rules", "SELECT * FROM routing_rules"),
    ("capabilities", "SELECT * FROM capabilities"),
    (
        "executor_availability",
        "SELECT * FROM executor_availability",
    ),
];

/// Where DuckDB's own path settings point on the query instance: nowhere real, so that no
/// setting, default or error names a folder of the server (DuckDB derives them from `$HOME`).
pub(crate) const NOWHERE: &str = "/nonexistent";

/// Opens the locked-down instance over `home`, seeing what `scope` allows; also returns the
/// snapshots that could not be built (each answers empty instead).
pub(crate) fn locked(
    home: &Path,
    scope: &Scope,
    limits: &QueryLimits,
) -> Result<(Connection, Vec<String>), DbError> {
    // Agent mail is exchange data too (the `mail` view); `.mess/` (locks, keys, the outbox)
    // stays out of reach.
    let confinement = yaml_scan::Confinement::new(home.to_owned()).opening(".mail");
    let con = open_instance(home, Some(&confinement))?;
    // One thread and a bounded buffer manager before anything reads files: the worker's
    // ceiling has to hold DuckDB and the values it builds outside that manager.
    con.execute_batch(&format!(
        "SET threads = 1; SET memory_limit = '{}B';",
        limits.duckdb_memory.max(16 * 1024 * 1024)
    ))
    .map_err(|e| DbError::duckdb("bounding DuckDB", e))?;
    let mut problems = Vec::new();
    if let Scope::Threads { files, accounts } = scope {
        problems = snapshot_directory(&con, &confinement, accounts);
        confinement.narrow(files.clone());
    }
    // After the assets are loaded: DuckDB's path settings pointed nowhere, external access
    // off for every later statement, and the configuration frozen so a query cannot turn it
    // back on. Nothing spills to disk, so a query cannot write temp files either.
    con.execute_batch(&format!(
        "SET temp_directory = ''; SET home_directory = '{NOWHERE}'; \
         SET extension_directory = '{NOWHERE}'; SET secret_directory = '{NOWHERE}'; \
         SET allow_persistent_secrets = false; \
         SET enable_external_access = false; SET lock_configuration = true;"
    ))
    .map_err(|e| DbError::duckdb("locking DuckDB down", e))?;
    Ok((con, problems))
}

/// Replaces the directory views by snapshots taken while every file is readable. A view that
/// cannot be built (a file it chokes on) answers empty, with its columns and types as over an
/// empty home, so one bad file cannot stop every scoped query; the failures are returned.
fn snapshot_directory(
    con: &Connection,
    confinement: &yaml_scan::Confinement,
    accounts: &HashSet<String>,
) -> Vec<String> {
    let keep = |view: &str, select: &str| {
        con.execute_batch(&format!(
            "CREATE TABLE \"__{view}\" AS {select}; CREATE OR REPLACE VIEW \"{view}\" AS SELECT * FROM \"__{view}\";"
        ))
    };
    // Account names are ids and refs, quoted as SQL strings all the same; NULL keeps `IN ()`
    // valid for a principal with no account.
    let list: Vec<String> = accounts
        .iter()
        .map(|a| format!("'{}'", a.replace('\'', "''")))
        .chain(std::iter::once("NULL".to_owned()))
        .collect();
    let shells: Vec<(&str, String)> = SHELLS
        .iter()
        .map(|(view, select)| (*view, select.replace("{accounts}", &list.join(", "))))
        .collect();
    let mut failed = Vec::new();
    let every = SNAPSHOTS
        .iter()
        .map(|(view, select)| (*view, (*select).to_owned()))
        .chain(shells);
    for (view, select) in every {
        if let Err(e) = keep(view, &select) {
            failed.push((view, select, e));
        }
    }
    if failed.is_empty() {
        return Vec::new();
    }
    // With no file readable, every view binds to its typed zero-row template. The caller
    // narrows the confinement again right after, so this never widens what a query sees.
    confinement.narrow(HashSet::new());
    failed
        .into_iter()
        .map(|(view, select, e)| {
            let empty = keep(view, &format!("SELECT * FROM ({select}) LIMIT 0"));
            match empty {
                Ok(()) => format!("the {view} view answers empty for key holders: {e}"),
                Err(again) => {
                    // Not even the empty form binds: the view is left out altogether.
                    let _ = con.execute_batch(&format!("DROP VIEW IF EXISTS \"{view}\""));
                    format!("the {view} view is unavailable to key holders: {e}; {again}")
                }
            }
        })
        .collect()
}

/// Runs `work` on `con`, interrupting it after `timeout`.
fn watched<T>(
    con: &Connection,
    timeout: Duration,
    work: impl FnOnce(&Connection) -> Result<T, DbError>,
) -> Result<T, DbError> {
    let handle = con.interrupt_handle();
    let (done, finished) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if finished.recv_timeout(timeout).is_err() {
            handle.interrupt();
            return true;
        }
        false
    });
    let outcome = work(con);
    let _ = done.send(());
    let timed_out = watchdog.join().unwrap_or(false);
    match outcome {
        Err(_) if timed_out => Err(DbError::Timeout {
            seconds: timeout.as_secs(),
        }),
        other => other,
    }
}

/// A statement that passed the checks, on its locked-down instance, ready to run.
pub struct Prepared {
    con: Connection,
    body: String,
    problems: Vec<String>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("body", &self.body)
            .finish_non_exhaustive()
    }
}

/// Opens the locked-down instance over `home` for `scope` and checks `sql`: everything before
/// the statement runs (and before its timeout starts).
pub fn prepare(
    home: &Path,
    sql: &str,
    limits: &QueryLimits,
    scope: &Scope,
) -> Result<Prepared, DbError> {
    let (con, problems) = locked(home, scope, limits)?;
    let body = check_shape(&con, sql)?;
    Ok(Prepared {
        con,
        body,
        problems,
    })
}

/// Runs one read-only statement over the home at `home`.
pub fn run(
    home: &Path,
    sql: &str,
    limits: &QueryLimits,
    scope: &Scope,
) -> Result<QueryResult, DbError> {
    prepare(home, sql, limits, scope)?.rows(limits)
}

/// Runs one read-only statement and writes its rows to `out` as an Arrow IPC stream, with
/// DuckDB's own column types (same lock-down, shape check, row cap and timeout as [`run`]; a
/// size cap of [`ARROW_MAX_BYTES`] instead of the character cap, which holds for the first
/// batch too: batches are cut to fit, and a first row larger than the cap is refused).
pub fn run_arrow(
    home: &Path,
    sql: &str,
    limits: &QueryLimits,
    scope: &Scope,
    out: &mut dyn Write,
) -> Result<ArrowDone, DbError> {
    prepare(home, sql, limits, scope)?.arrow(limits, out)
}

impl Prepared {
    /// Runs the statement: rows as text and as JSON, within the row and character caps.
    pub fn rows(self, limits: &QueryLimits) -> Result<QueryResult, DbError> {
        let Prepared {
            con,
            body,
            problems,
        } = self;
        // One execution yields both forms: each row as JSON (nested values intact) and every
        // column as DuckDB's own text, so the rows shown are the rows counted.
        let limited = format!(
            "SELECT to_json(q)::VARCHAR AS \"__row_json\", COLUMNS(*)::VARCHAR FROM (SELECT * FROM (\n{body}\n) LIMIT {}) q",
            limits.max_rows.saturating_add(1)
        );
        let (columns, mut rows, mut json_rows) = watched(&con, limits.timeout, |con| {
            fetch(con, &limited, limits.max_chars)
        })?;
        let mut truncated = false;
        let mut warning = None;
        if rows.len() > limits.max_rows {
            rows.truncate(limits.max_rows);
            json_rows.truncate(limits.max_rows);
            truncated = true;
            warning = Some(format!("only the first {} rows are shown", limits.max_rows));
        }
        let size = |rows: &[String]| rows.iter().map(|r| r.len() + 2).sum::<usize>();
        if size(&json_rows) > limits.max_chars {
            while !json_rows.is_empty() && size(&json_rows) > limits.max_chars {
                json_rows.pop();
            }
            rows.truncate(json_rows.len());
            truncated = true;
            warning = Some(format!(
                "output cut to {} rows to stay under {} characters",
                rows.len(),
                limits.max_chars
            ));
        }
        Ok(QueryResult {
            columns,
            rows,
            json_rows,
            truncated,
            warning,
            problems,
        })
    }

    /// Writes the statement's rows to `out` as an Arrow IPC stream (see [`run_arrow`]).
    pub fn arrow(self, limits: &QueryLimits, out: &mut dyn Write) -> Result<ArrowDone, DbError> {
        let Prepared {
            con,
            body,
            problems,
        } = self;
        arrow_rows(&con, &body, limits, out).map(|truncated| ArrowDone {
            truncated,
            problems,
        })
    }
}

type Fetched = (Vec<String>, Vec<Vec<Option<String>>>, Vec<String>);

/// Fetches the rows as DuckDB produces them, stopping once their JSON exceeds `max_chars` (the
/// output would be cut there anyway, and the rest is never computed).
fn fetch(con: &Connection, sql: &str, max_chars: usize) -> Result<Fetched, DbError> {
    let mut stmt = con.prepare(sql).map_err(refused_or_failed)?;
    let mut batches = Vec::new();
    let mut chars = 0usize;
    let stream = stmt.stream_arrow([]).map_err(refused_or_failed)?;
    let schema = stream.get_schema();
    for batch in stream {
        let batch = batch.map_err(refused_or_failed)?;
        if let Some(json) = batch
            .columns()
            .first()
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        {
            chars = chars.saturating_add(json.value_data().len());
        }
        batches.push(batch);
        if chars > max_chars {
            break;
        }
    }
    let columns: Vec<String> = schema
        .fields()
        .iter()
        .skip(1)
        .map(|f| f.name().clone())
        .collect();
    let mut rows = Vec::new();
    let mut json_rows = Vec::new();
    for batch in &batches {
        let texts: Vec<&StringArray> = batch
            .columns()
            .iter()
            .map(|c| c.as_any().downcast_ref::<StringArray>())
            .collect::<Option<_>>()
            .ok_or_else(|| DbError::Failed {
                message: "query failed: a column could not be shown as text".to_owned(),
            })?;
        for i in 0..batch.num_rows() {
            json_rows.push(if texts[0].is_null(i) {
                "null".to_owned()
            } else {
                texts[0].value(i).to_owned()
            });
            rows.push(
                texts[1..]
                    .iter()
                    .map(|c| (!c.is_null(i)).then(|| c.value(i).to_owned()))
                    .collect(),
            );
        }
    }
    Ok((columns, rows, json_rows))
}

/// DuckDB's permission errors are refusals of the query, everything else a query error; both
/// reach the user with DuckDB's own text.
fn refused_or_failed(e: duckdb::Error) -> DbError {
    let text = e.to_string();
    if text.contains("Permission Error") || text.contains("may only read the exchange's files") {
        return DbError::Refused {
            message: format!(
                "refused: the query may only read the exchange (through its views and read_yaml_auto): {text}"
            ),
        };
    }
    DbError::Failed {
        message: format!("query failed: {text}"),
    }
}

/// Accepts a single SELECT-shaped statement (SELECT, WITH, FROM-first, DESCRIBE, SUMMARIZE,
/// SHOW) and returns its text without trailing semicolons.
pub(crate) fn check_shape(con: &Connection, sql: &str) -> Result<String, DbError> {
    let body = sql[..code_end(sql)].trim().to_owned();
    if body.is_empty() {
        return Err(DbError::Refused {
            message: "the query is empty".to_owned(),
        });
    }
    let verdict: String = con
        .query_row("SELECT json_serialize_sql(?)::VARCHAR", [&body], |r| {
            r.get(0)
        })
        .map_err(refused_or_failed)?;
    let parsed: serde_json::Value =
        serde_json::from_str(&verdict).unwrap_or(serde_json::Value::Null);
    if parsed["error"].as_bool().unwrap_or(true) {
        let why = parsed["error_message"].as_str().unwrap_or("not a query");
        if why.contains("Only SELECT statements") {
            return Err(DbError::Refused {
                message: "refused: only read-only queries (SELECT, WITH, DESCRIBE, SUMMARIZE) are allowed; this statement would write, attach, install or change settings".to_owned(),
            });
        }
        return Err(DbError::Failed {
            message: format!("query failed: {why}"),
        });
    }
    if parsed["statements"].as_array().map_or(0, Vec::len) != 1 {
        return Err(DbError::Refused {
            message: "refused: send one statement at a time".to_owned(),
        });
    }
    if let Some(name) = introspection(&parsed["statements"]) {
        return Err(DbError::Refused {
            message: format!(
                "refused: {name} describes the database engine, not the exchange; queries may read the views, their columns (DESCRIBE, SHOW) and read_yaml_auto"
            ),
        });
    }
    Ok(body)
}

/// Functions a query may not call: they describe DuckDB itself (settings, the SQL of views
/// and macros, extensions, secrets, memory, files) or run SQL given as text, which the check
/// of the parse tree could not see. Every name starting with one of [`REFUSED_PREFIXES`] is
/// refused too.
pub const REFUSED_FUNCTIONS: &[&str] = &[
    "current_setting",
    "getenv",
    "getvariable",
    "which_secret",
    "query",
    "query_table",
    "json_execute_serialized_sql",
    "json_serialize_plan",
];

/// Name prefixes of refused functions and tables: DuckDB's catalog functions and views
/// (`duckdb_settings()`, `duckdb_views`, `pragma_database_list`, `pg_get_viewdef`,
/// `sqlite_master`, ...).
pub const REFUSED_PREFIXES: &[&str] = &["duckdb_", "pragma_", "pg_", "sqlite_"];

/// Schemas and catalogs a query may not name: the SQL standard's and PostgreSQL's views of
/// the catalog (`information_schema.views` holds every view's SQL) and DuckDB's own.
pub const REFUSED_SCHEMAS: &[&str] = &["information_schema", "pg_catalog", "system"];

/// The first refused function, table or schema named anywhere in a serialized parse tree
/// (sub-queries, CTEs, expressions and lambdas included).
fn introspection(tree: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    let refused_name = |name: &str| {
        let name = name.to_ascii_lowercase();
        REFUSED_FUNCTIONS.contains(&name.as_str())
            || REFUSED_PREFIXES.iter().any(|p| name.starts_with(p))
    };
    let refused_schema = |name: &str| REFUSED_SCHEMAS.contains(&name.to_ascii_lowercase().as_str());
    match tree {
        Value::Object(map) => {
            if let Some(name) = map.get("function_name").and_then(Value::as_str)
                && refused_name(name)
            {
                return Some(format!("{name}()"));
            }
            if map.get("type").and_then(Value::as_str) == Some("BASE_TABLE") {
                let field = |k: &str| map.get(k).and_then(Value::as_str).unwrap_or_default();
                let (table, schema, catalog) = (
                    field("table_name"),
                    field("schema_name"),
                    field("catalog_name"),
                );
                if refused_name(table) {
                    return Some(table.to_owned());
                }
                if let Some(s) = [schema, catalog].into_iter().find(|s| refused_schema(s)) {
                    return Some(format!("{s}.{table}"));
                }
            }
            for key in ["schema", "catalog"] {
                if let Some(s) = map.get(key).and_then(Value::as_str)
                    && refused_schema(s)
                {
                    return Some(s.to_owned());
                }
            }
            map.values().find_map(introspection)
        }
        Value::Array(items) => items.iter().find_map(introspection),
        _ => None,
    }
}

/// The end of the last code in `sql`: trailing semicolons, blanks and comments are not code
/// (they would break the statement once it is wrapped in a sub-query).
fn code_end(sql: &str) -> usize {
    let bytes = sql.as_bytes();
    let mut end = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                i = sql[i..].find('\n').map_or(bytes.len(), |n| i + n);
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = sql[i + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |n| i + 2 + n + 2);
                continue;
            }
            quote @ (b'\'' | b'"') => {
                // A quoted string or name runs to its closing quote (doubled quotes included).
                let mut j = i + 1;
                while j < bytes.len() {
                    if bytes[j] == quote {
                        if bytes.get(j + 1) == Some(&quote) {
                            j += 2;
                            continue;
                        }
                        break;
                    }
                    j += 1;
                }
                i = (j + 1).min(bytes.len());
                end = i;
                continue;
            }
            b';' => {}
            c if c.is_ascii_whitespace() => {}
            _ => end = i + 1,
        }
        i += 1;
    }
    // `end` is always just past an ASCII byte or a closing quote, so it is a char boundary;
    // non-ASCII bytes of a name count as code and move it past the whole character.
    while !sql.is_char_boundary(end) {
        end += 1;
    }
    end
}

/// A query's answer as an Arrow IPC stream (DuckDB's own column types), for Arrow clients.
#[derive(Debug)]
pub struct ArrowAnswer {
    /// The IPC stream: the schema, then the batches.
    pub ipc: Vec<u8>,
    /// True when rows were left out (row cap or size cap).
    pub truncated: bool,
}

/// How an Arrow run ended (its batches went to the writer).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ArrowDone {
    /// True when rows were left out (row cap or size cap).
    pub truncated: bool,
    /// As in [`QueryResult::problems`].
    pub problems: Vec<String>,
}

/// Most bytes of Arrow data one query returns.
pub const ARROW_MAX_BYTES: usize = 64 * 1024 * 1024;

/// Runs `body` and writes its rows to `out` as Arrow IPC within the row and size caps;
/// whether rows were left out.
fn arrow_rows(
    con: &Connection,
    body: &str,
    limits: &QueryLimits,
    out: &mut dyn Write,
) -> Result<bool, DbError> {
    let limited = format!(
        "SELECT * FROM (\n{body}\n) LIMIT {}",
        limits.max_rows.saturating_add(1)
    );
    let written = |e: ArrowError| DbError::Worker {
        message: format!("cannot write the Arrow answer: {e}"),
    };
    watched(con, limits.timeout, |con| {
        let mut stmt = con.prepare(&limited).map_err(refused_or_failed)?;
        let stream = stmt.stream_arrow([]).map_err(refused_or_failed)?;
        let mut writer = StreamWriter::try_new(out, &stream.get_schema()).map_err(written)?;
        let (mut rows, mut bytes, mut truncated) = (0usize, 0usize, false);
        for batch in stream {
            let mut batch = batch.map_err(refused_or_failed)?;
            let room = limits.max_rows - rows.min(limits.max_rows);
            if batch.num_rows() > room {
                batch = batch.slice(0, room);
                truncated = true;
            }
            let fit = rows_within(&batch, ARROW_MAX_BYTES - bytes);
            if fit < batch.num_rows() {
                if rows + fit == 0 {
                    return Err(DbError::Failed {
                        message: format!(
                            "query failed: the first row alone is larger than the {} MiB an Arrow answer may hold; select fewer or smaller columns",
                            ARROW_MAX_BYTES / (1024 * 1024)
                        ),
                    });
                }
                batch = batch.slice(0, fit);
                truncated = true;
            }
            if batch.num_rows() > 0 {
                bytes += slice_size(&batch, batch.num_rows());
                rows += batch.num_rows();
                writer.write(&batch).map_err(written)?;
            }
            if truncated {
                break;
            }
        }
        writer.finish().map_err(written)?;
        Ok(truncated)
    })
}

/// Bytes of the first `rows` rows of `batch` (the buffers they use, as IPC writes them).
fn slice_size(batch: &RecordBatch, rows: usize) -> usize {
    batch
        .columns()
        .iter()
        .map(|c| {
            c.slice(0, rows)
                .to_data()
                .get_slice_memory_size()
                .unwrap_or(usize::MAX)
        })
        .fold(0usize, usize::saturating_add)
}

/// How many leading rows of `batch` fit in `budget` bytes.
fn rows_within(batch: &RecordBatch, budget: usize) -> usize {
    if slice_size(batch, batch.num_rows()) <= budget {
        return batch.num_rows();
    }
    // Sizes grow with the row count, so the longest prefix that fits is found by bisection.
    let (mut fits, mut over) = (0usize, batch.num_rows());
    while over - fits > 1 {
        let mid = fits + (over - fits) / 2;
        if slice_size(batch, mid) <= budget {
            fits = mid;
        } else {
            over = mid;
        }
    }
    fits
}

impl QueryResult {
    /// The result as CSV: a header line, then one line per row (NULL as an empty cell).
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        let line = |cells: Vec<String>, out: &mut String| {
            out.push_str(&cells.join(","));
            out.push('\n');
        };
        line(self.columns.iter().map(|c| csv_cell(c)).collect(), &mut out);
        for row in &self.rows {
            line(
                row.iter()
                    .map(|c| c.as_deref().map(csv_cell).unwrap_or_default())
                    .collect(),
                &mut out,
            );
        }
        out
    }

    /// The result as one JSON object: `columns`, `rows` (objects with nested values intact),
    /// `row_count`, `truncated`, and `warning` when rows were left out.
    pub fn to_json(&self) -> String {
        let columns = serde_json::to_string(&self.columns).unwrap_or_else(|_| "[]".to_owned());
        let warning = self
            .warning
            .as_ref()
            .and_then(|w| serde_json::to_string(w).ok())
            .map(|w| format!(", \"warning\": {w}"))
            .unwrap_or_default();
        format!(
            "{{\"columns\": {columns}, \"rows\": [{}], \"row_count\": {}, \"truncated\": {}{warning}}}",
            self.json_rows.join(", "),
            self.json_rows.len(),
            self.truncated
        )
    }
}

/// Quotes a CSV cell when it holds a comma, a quote or a line break.
fn csv_cell(value: &str) -> String {
    if value.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value.to_owned()
    }
}
