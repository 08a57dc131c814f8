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

use crate::db::error::DbError;
use crate::protocol::time::{self, Timestamp};

/// What the snapshot was taken from: each directory file's name, size, modification time and
/// inode (writes replace files by rename, so a new version has a new inode), and the hour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    files: Vec<(String, u64, u128, u64)>,
    hour: i64,
}

/// The key of the directory at `home` for routing at `at`.
pub(crate) fn key(home: &Path, at: &Timestamp) -> Key {
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
    }
}

/// Takes the snapshot for routing at `at`.
pub(crate) fn refresh(con: &Connection, at: &Timestamp) -> Result<(), DbError> {
    let instant = time::format_timestamp(at);
    con.execute_batch(&format!(
        "SET search_path = 'main';
         CREATE SCHEMA IF NOT EXISTS snap;
         CREATE OR REPLACE TABLE snap.executors AS SELECT * FROM main.executors;
         CREATE OR REPLACE TABLE snap.routing_rules AS SELECT * FROM main.routing_rules;
         CREATE OR REPLACE TABLE snap.available AS
             SELECT id, availability, schedule, available
             FROM main.executor_availability_at('{instant}'::TIMESTAMPTZ);
         CREATE OR REPLACE MACRO snap.executor_availability_at(instant) AS TABLE
             SELECT a.id, a.availability, a.schedule, a.available,
                    coalesce(w.active, 0) AS active_claims
             FROM snap.available a LEFT JOIN main.active_claims() w ON w.executor = a.id
             ORDER BY a.id;"
    ))
    .map_err(|e| DbError::duckdb("the routing snapshot", e))
}
