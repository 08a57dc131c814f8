//! The routing snapshot of the embedded read model: the directory views routing reads
//! (`executors`, `routing_rules`), each executor's schedule verdict for every minute of the
//! current hour and, when a rule ranks by a strategy, `executor_stats` and `executor_reputation`
//! as of the hour, kept as
//! tables in schema `snap`. The directory tables are refreshed when config.yaml, routing.yaml
//! or a registration changes, the verdicts and statistics when the hour turns (schedules are
//! read to the minute: a pass reads its minute's verdicts). Routing then runs the same
//! `route_batch` with `snap` first on the search path, where only the active claims are read
//! live; binding the directory views and the schedule macros at every routing pass cost most
//! of its time.

use std::path::Path;
use std::time::UNIX_EPOCH;

use duckdb::Connection;

use crate::db::RoutingDirectory;
use crate::db::error::DbError;
use crate::protocol::time::{self, Timestamp};

/// What the directory tables were taken from: each directory file's name, size, modification
/// time and inode (writes replace files by rename, so a new version has a new inode), and the
/// directory the exchange handed over, if any (it is read from the same files, but may leave
/// entries out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    files: Vec<(String, u64, u128, u64)>,
    given: Option<String>,
}

/// A snapshot as taken: its directory key, and the hour of its statistics and verdicts.
#[derive(Debug, Clone)]
pub(crate) struct Taken {
    key: Key,
    hour: i64,
}

/// Which parts of a snapshot a routing pass must take again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refresh {
    directory: bool,
    hour: bool,
}

impl Refresh {
    /// Whether anything is to be taken.
    pub(crate) fn any(self) -> bool {
        self.directory || self.hour
    }
}

impl Taken {
    /// The snapshot of `key` taken for routing at `at`.
    pub(crate) fn new(key: Key, at: &Timestamp) -> Taken {
        Taken {
            key,
            hour: at.timestamp().div_euclid(3600),
        }
    }
}

/// What routing at `at` over the directory `key` must refresh of the snapshot `taken`.
pub(crate) fn refresh_for(taken: Option<&Taken>, key: &Key, at: &Timestamp) -> Refresh {
    match taken {
        Some(t) if &t.key == key => Refresh {
            directory: false,
            hour: t.hour != at.timestamp().div_euclid(3600),
        },
        _ => Refresh {
            directory: true,
            hour: true,
        },
    }
}

/// The key of the directory at `home`, as handed over in `directory` if at all.
pub(crate) fn key(home: &Path, directory: Option<&RoutingDirectory>) -> Key {
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
        given: directory.map(|d| format!("{d:?}")),
    }
}

/// The JSON shape of an `ExecutorRow` for `from_json`.
const EXECUTOR_SHAPE: &str = r#"[{"id":"VARCHAR","capabilities":["VARCHAR"],"capability_meta":"MAP(VARCHAR, JSON)","availability":"VARCHAR","schedule":"VARCHAR","timezone":"VARCHAR","access":["VARCHAR"],"location":"JSON","environment":["VARCHAR"]}]"#;

/// The JSON shape of a `RuleRow` for `from_json`.
const RULE_SHAPE: &str = r#"[{"position":"BIGINT","is_default":"BOOLEAN","match_capability":"VARCHAR","match_urgency":"VARCHAR","match_precision":"VARCHAR","match_unsupported":["VARCHAR"],"prefer":["VARCHAR"],"strategy":"VARCHAR"}]"#;

/// Takes the parts of the snapshot `what` names for routing at `at`: the directory from
/// `directory` when given, else from the views.
pub(crate) fn refresh(
    con: &Connection,
    at: &Timestamp,
    directory: Option<&RoutingDirectory>,
    what: Refresh,
) -> Result<(), DbError> {
    let fail = |e| DbError::duckdb("the routing snapshot", e);
    con.execute_batch("SET search_path = 'main'; CREATE SCHEMA IF NOT EXISTS snap;")
        .map_err(fail)?;
    if what.directory {
        match directory {
            None => con
                .execute_batch(
                    "CREATE OR REPLACE TABLE snap.executors AS SELECT * FROM main.executors;
                     CREATE OR REPLACE TABLE snap.routing_rules AS SELECT * FROM main.routing_rules;",
                )
                .map_err(fail)?,
            Some(d) => {
                // The rows arrive as one JSON parameter: nothing of them is pasted into SQL.
                let executors =
                    serde_json::to_string(&d.executors).unwrap_or_else(|_| "[]".into());
                let rules = serde_json::to_string(&d.rules).unwrap_or_else(|_| "[]".into());
                // The shapes are constants of this file; the tables take the columns and types
                // the shapes give, whatever the rows hold.
                con.execute_batch(&format!(
                    "CREATE OR REPLACE TEMP TABLE executor_rows AS \
                         SELECT unnest(from_json('[]'::JSON, '{EXECUTOR_SHAPE}'), recursive := true);
                     CREATE OR REPLACE TABLE snap.routing_rules AS \
                         SELECT unnest(from_json('[]'::JSON, '{RULE_SHAPE}'), recursive := true);"
                ))
                .map_err(fail)?;
                con.execute(
                    &format!(
                        "INSERT INTO executor_rows \
                         SELECT unnest(from_json(?::JSON, '{EXECUTOR_SHAPE}'), recursive := true)"
                    ),
                    [executors],
                )
                .map_err(fail)?;
                // The columns the executors view derives, derived by the same macros.
                con.execute_batch(
                    "CREATE OR REPLACE TABLE snap.executors AS
                         SELECT *, executor_places(access, location) AS places, area_of(location) AS area,
                                capability_facts(capability_meta) AS capability_facts
                         FROM executor_rows;
                     DROP TABLE executor_rows;",
                )
                .map_err(fail)?;
                con.execute(
                    &format!(
                        "INSERT INTO snap.routing_rules \
                         SELECT unnest(from_json(?::JSON, '{RULE_SHAPE}'), recursive := true)"
                    ),
                    [rules],
                )
                .map_err(fail)?;
            }
        }
    }
    if what.hour {
        // Only strategy rules read the statistics, which cost a pass over every thread's
        // history: without one the table stays empty.
        let strategies: i64 = con
            .query_row(
                "SELECT count(*) FROM snap.routing_rules WHERE strategy IS NOT NULL",
                [],
                |row| row.get(0),
            )
            .map_err(fail)?;
        let stats = if strategies > 0 {
            "CREATE OR REPLACE TABLE snap.executor_stats AS SELECT * FROM main.executor_stats"
        } else {
            "CREATE OR REPLACE TABLE snap.executor_stats (executor VARCHAR, claimed BIGINT,
                 completed BIGINT, failed BIGINT, declined BIGINT, median_time_to_claim DOUBLE,
                 median_time_to_complete DOUBLE, completions_per_day DOUBLE)"
        };
        con.execute_batch(stats).map_err(fail)?;
        let reputation = if strategies > 0 {
            "CREATE OR REPLACE TABLE snap.executor_reputation AS
                 SELECT * FROM main.executor_reputation WHERE capability IS NULL"
        } else {
            "CREATE OR REPLACE TABLE snap.executor_reputation (executor VARCHAR,
                 capability VARCHAR, rated BIGINT, avg_rating DOUBLE, score DOUBLE)"
        };
        con.execute_batch(reputation).map_err(fail)?;
    }
    if what.hour {
        // One statement for the hour's 60 minutes: evaluating costs little beside binding.
        let instant = time::format_timestamp(at);
        con.execute_batch(&format!(
            "CREATE OR REPLACE TABLE snap.available AS
                 SELECT id, availability, schedule, timezone, m.minute,
                        coalesce(available_at(availability, schedule,
                                              make_timestamp(epoch_us('{instant}'::TIMESTAMPTZ) // 3600000000 * 3600000000
                                                             + m.minute::BIGINT * 60000000),
                                              tz_name := timezone), false)
                            AS available
                 FROM snap.executors, (SELECT range::INTEGER AS minute FROM range(60)) m"
        ))
        .map_err(fail)?;
    }
    if what.directory {
        // Created after `snap.available`, which it reads (a macro binds when it is created);
        // `instant` is within the hour the verdicts were taken for.
        con.execute_batch(
            "CREATE OR REPLACE MACRO snap.executor_availability_at(instant) AS TABLE
                 SELECT a.id, a.availability, a.schedule, a.timezone, a.available,
                        coalesce(w.active, 0) AS active_claims
                 FROM snap.available a LEFT JOIN main.active_claims() w ON w.executor = a.id
                 WHERE a.minute = minute(make_timestamp(epoch_us(instant)))
                 ORDER BY a.id;",
        )
        .map_err(fail)?;
    }
    Ok(())
}
