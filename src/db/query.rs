//! Read-only SQL for people and agents (`mess query`, later `/query` and `mess_query`): a
//! dedicated DuckDB instance with no file or network access of its own, `read_yaml_auto`
//! confined to the home, one SELECT-shaped statement, a row cap, an output cap and a timeout.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use duckdb::Connection;
use duckdb::arrow::array::{Array, StringArray};
use duckdb::arrow::datatypes::SchemaRef;
use duckdb::arrow::record_batch::RecordBatch;

use crate::db::error::DbError;
use crate::db::open_instance;

/// Bounds on one query.
#[derive(Debug, Clone)]
pub struct QueryLimits {
    /// Most rows returned; more set `truncated`.
    pub max_rows: usize,
    /// Longest run before the query is interrupted.
    pub timeout: Duration,
    /// Most characters of output; rows are dropped from the end to fit.
    pub max_chars: usize,
}

impl QueryLimits {
    /// The documented defaults: 1,000 rows, 10 s, 50,000 characters.
    pub fn defaults() -> QueryLimits {
        QueryLimits {
            max_rows: 1000,
            timeout: Duration::from_secs(10),
            max_chars: 50_000,
        }
    }
}

/// A query's answer: column names, rows of text cells (NULL as `None`), and rows of JSON
/// objects (`to_json` of each row, nested values intact).
#[derive(Debug, Clone, PartialEq)]
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
}

/// Which threads a query sees.
#[derive(Debug, Clone)]
pub enum Scope {
    /// Every file of the home (the operator: the CLI, local tools).
    All,
    /// Only these thread files (paths relative to the home), for a principal who may see
    /// only their own threads. The directory views (executors without their `notify`
    /// targets, routing rules, capabilities, availability) are answered from a snapshot taken
    /// before the narrowing; every other file of the home is absent.
    Threads(HashSet<PathBuf>),
}

/// The directory views a scoped query keeps, as snapshots; `executors` loses `notify`, which
/// holds people's contact details.
const SNAPSHOTS: &[(&str, &str)] = &[
    ("executors", "SELECT * EXCLUDE (notify) FROM executors"),
    ("routing_rules", "SELECT * FROM routing_rules"),
    ("capabilities", "SELECT * FROM capabilities"),
    (
        "executor_availability",
        "SELECT * FROM executor_availability",
    ),
];

/// Opens the locked-down instance over `home`, seeing what `scope` allows.
fn locked(home: &Path, scope: &Scope) -> Result<Connection, DbError> {
    // Agent mail is exchange data too (the `mail` view); `.mess/` (locks, keys, the outbox)
    // stays out of reach.
    let confinement = yaml_scan::Confinement::new(home.to_owned()).opening(".mail");
    let con = open_instance(home, Some(&confinement))?;
    if let Scope::Threads(files) = scope {
        for (view, select) in SNAPSHOTS {
            con.execute_batch(&format!(
                "CREATE TABLE \"__{view}\" AS {select}; CREATE OR REPLACE VIEW \"{view}\" AS SELECT * FROM \"__{view}\";"
            ))
            .map_err(|e| DbError::duckdb(format!("snapshot of {view}"), e))?;
        }
        confinement.narrow(files.clone());
    }
    // After the assets are loaded: external access off for every later statement, and the
    // configuration frozen so a query cannot turn it back on. Memory is bounded and nothing
    // spills to disk, so a query cannot exhaust the machine or write temp files.
    con.execute_batch(
        "SET memory_limit = '1GB'; SET temp_directory = ''; \
         SET enable_external_access = false; SET lock_configuration = true;",
    )
    .map_err(|e| DbError::duckdb("locking DuckDB down", e))?;
    Ok(con)
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

/// Runs one read-only statement over the home at `home`.
pub fn run(
    home: &Path,
    sql: &str,
    limits: &QueryLimits,
    scope: &Scope,
) -> Result<QueryResult, DbError> {
    let con = locked(home, scope)?;
    let body = check_shape(&con, sql)?;
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
    })
}

type Fetched = (Vec<String>, Vec<Vec<Option<String>>>, Vec<String>);

/// Fetches the rows, stopping once their JSON exceeds `max_chars` (the output would be cut
/// there anyway, and a few huge values must not be held in memory a thousand times over).
fn fetch(con: &Connection, sql: &str, max_chars: usize) -> Result<Fetched, DbError> {
    let mut stmt = con.prepare(sql).map_err(refused_or_failed)?;
    let mut batches = Vec::new();
    let mut chars = 0usize;
    for batch in stmt.query_arrow([]).map_err(refused_or_failed)? {
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
    let schema = stmt.schema();
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
fn check_shape(con: &Connection, sql: &str) -> Result<String, DbError> {
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
    Ok(body)
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

/// The typed result of a query, for Arrow clients.
#[derive(Debug)]
pub struct ArrowResult {
    /// The columns and their types.
    pub schema: SchemaRef,
    /// The rows, in batches.
    pub batches: Vec<RecordBatch>,
    /// True when rows were left out (row cap or size cap).
    pub truncated: bool,
}

/// Most bytes of Arrow data one query returns.
const ARROW_MAX_BYTES: usize = 64 * 1024 * 1024;

/// Runs one read-only statement and keeps DuckDB's own column types (same lock-down, shape
/// check, row cap and timeout as [`run`]; a size cap instead of the character cap).
pub fn run_arrow(
    home: &Path,
    sql: &str,
    limits: &QueryLimits,
    scope: &Scope,
) -> Result<ArrowResult, DbError> {
    let con = locked(home, scope)?;
    let body = check_shape(&con, sql)?;
    let limited = format!(
        "SELECT * FROM (\n{body}\n) LIMIT {}",
        limits.max_rows.saturating_add(1)
    );
    watched(&con, limits.timeout, |con| {
        let mut stmt = con.prepare(&limited).map_err(refused_or_failed)?;
        let mut batches = Vec::new();
        let (mut rows, mut bytes, mut truncated) = (0usize, 0usize, false);
        for batch in stmt.query_arrow([]).map_err(refused_or_failed)? {
            let room = limits.max_rows - rows.min(limits.max_rows);
            if batch.num_rows() > room || bytes > ARROW_MAX_BYTES {
                if room > 0 && bytes <= ARROW_MAX_BYTES {
                    batches.push(batch.slice(0, room));
                }
                truncated = true;
                break;
            }
            rows += batch.num_rows();
            bytes += batch.get_array_memory_size();
            batches.push(batch);
        }
        Ok(ArrowResult {
            schema: stmt.schema(),
            batches,
            truncated,
        })
    })
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
