//! The routing snapshot of the embedded read model: the directory views routing reads
//! (`executors`, `routing_rules`) and each executor's schedule verdict for the current hour,
//! kept as tables in schema `snap` and refreshed when config.yaml, routing.yaml or a
//! registration changes, or the hour turns (schedules are evaluated per hour). Routing then
//! runs the same `route_batch` with `snap` first on the search path, where only the active
//! claims are read live; binding the directory views and the cron macros at every routing
//! pass cost most of its time.

use std::path::Path;
use std::time::UNIX_EPOCH;

use duckdb::Connection;

use crate::db::RoutingDirectory;
use crate::db::error::DbError;
use crate::protocol::time::{self, Timestamp};

/// What the snapshot was taken from: each directory file's name, size, modification time and
/// inode (writes replace files by rename, so a new version has a new inode), the hour, and the
/// directory the exchange handed over, if any (it is read from the same files, but may leave
/// entries out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    files: Vec<(String, u64, u128, u64)>,
    hour: i64,
    given: Option<String>,
}

/// The key of the directory at `home` for routing at `at`.
pub(crate) fn key(home: &Path, at: &Timestamp, directory: Option<&RoutingDirectory>) -> Key {
    use std::os::unix::fs::MetadataExt as _;
    let stamp = |path: &Path| {
        std::fs::metadata(path).ok().map(|m| {
            let modified = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            (
                path.to_string_lossy().into_owned(),
                m.len(),
                modified,
                m.ino(),
            )
        })
    };
    let mut files: Vec<_> = [home.join("config.yaml"), home.join("routing.yaml")]
        .iter()
        .filter_map(|p| stamp(p))
        .collect();
    let registrations = home.join("executors");
    if let Some(dir) = stamp(&registrations) {
        files.push(dir);
        if let Ok(entries) = std::fs::read_dir(&registrations) {
            let mut more: Vec<_> = entries
                .filter_map(Result::ok)
                .filter_map(|e| stamp(&e.path()))
                .collect();
            more.sort();
            files.extend(more);
        }
    }
    Key {
        files,
        hour: at.timestamp().div_euclid(3600),
        given: directory.map(|d| format!("{d:?}")),
    }
}

/// Takes the snapshot for routing at `at`: from `directory` when given, else from the views.
pub(crate) fn refresh(
    con: &Connection,
    at: &Timestamp,
    directory: Option<&RoutingDirectory>,
) -> Result<(), DbError> {
    let fail = |e| DbError::duckdb("the routing snapshot", e);
    con.execute_batch("SET search_path = 'main'; CREATE SCHEMA IF NOT EXISTS snap;")
        .map_err(fail)?;
    match directory {
        None => con
            .execute_batch(
                "CREATE OR REPLACE TABLE snap.executors AS SELECT * FROM main.executors;
                 CREATE OR REPLACE TABLE snap.routing_rules AS SELECT * FROM main.routing_rules;",
            )
            .map_err(fail)?,
        Some(d) => {
            // The rows arrive as one JSON parameter: nothing of them is pasted into SQL.
            let executors = serde_json::to_string(&d.executors).unwrap_or_else(|_| "[]".into());
            let rules = serde_json::to_string(&d.rules).unwrap_or_else(|_| "[]".into());
            con.execute_batch(
                "CREATE OR REPLACE TABLE snap.executors (id VARCHAR, capabilities VARCHAR[],
                     availability VARCHAR, schedule VARCHAR);
                 CREATE OR REPLACE TABLE snap.routing_rules (position BIGINT, is_default BOOLEAN,
                     match_capability VARCHAR, match_urgency VARCHAR, match_precision VARCHAR,
                     match_unsupported VARCHAR[], prefer VARCHAR[], strategy VARCHAR);",
            )
            .map_err(fail)?;
            con.execute(
                "INSERT INTO snap.executors SELECT unnest(from_json(?::JSON, \
                 '[{\"id\":\"VARCHAR\",\"capabilities\":[\"VARCHAR\"],\"availability\":\"VARCHAR\",\"schedule\":\"VARCHAR\"}]'), recursive := true)",
                [executors],
            )
            .map_err(fail)?;
            con.execute(
                "INSERT INTO snap.routing_rules SELECT unnest(from_json(?::JSON, \
                 '[{\"position\":\"BIGINT\",\"is_default\":\"BOOLEAN\",\"match_capability\":\"VARCHAR\",\
                 \"match_urgency\":\"VARCHAR\",\"match_precision\":\"VARCHAR\",\"match_unsupported\":[\"VARCHAR\"],\
                 \"prefer\":[\"VARCHAR\"],\"strategy\":\"VARCHAR\"}]'), recursive := true)",
                [rules],
            )
            .map_err(fail)?;
        }
    }
    let instant = time::format_timestamp(at);
    con.execute_batch(&format!(
        "CREATE OR REPLACE TABLE snap.available AS
             SELECT id, availability, schedule,
                    coalesce(available_at(availability, schedule, '{instant}'::TIMESTAMPTZ), false) AS available
             FROM snap.executors;
         CREATE OR REPLACE MACRO snap.executor_availability_at(instant) AS TABLE
             SELECT a.id, a.availability, a.schedule, a.available,
                    coalesce(w.active, 0) AS active_claims
             FROM snap.available a LEFT JOIN main.active_claims() w ON w.executor = a.id
             ORDER BY a.id;"
    ))
    .map_err(fail)
}
