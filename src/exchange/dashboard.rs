//! What the operator dashboard shows, read from the same views SQL users query (one statement
//! per view of the page, run as the operator in a query worker, so the dashboard costs the
//! exchange what a `mess query` does) and, for the outbox, from the store's job records. Each
//! answer is JSON for the page (`http::dashboard`); times are RFC 3339.

use serde_json::{Map, Value, json};

use crate::db::query::QueryLimits;
use crate::exchange::{Error, Exchange};
use crate::protocol::ids::ThreadRef;
use crate::protocol::time;
use crate::store::outbox::{Delivery, Shelf};

/// The operator dashboard's reads. One of the parts `Exchange` hands out
/// ([`Exchange::dashboard`]).
#[derive(Clone, Copy)]
pub struct Dashboard<'a> {
    ex: &'a Exchange,
}

impl Exchange {
    /// The operator dashboard's reads.
    pub fn dashboard(&self) -> Dashboard<'_> {
        Dashboard { ex: self }
    }
}

/// What `/metrics` reads at a scrape: levels rather than events.
#[derive(Debug, Default)]
pub struct Levels {
    /// Open threads (received, executing) by state.
    pub threads: Vec<(&'static str, usize)>,
    /// Pending threads by required capability (`(any)` for a request that requires none).
    pub pending: std::collections::BTreeMap<String, usize>,
    /// Queries running now.
    pub queries_running: usize,
}

impl Exchange {
    /// The levels `/metrics` reports, from the open threads' envelopes (never the finished
    /// ones, which only grow).
    pub fn levels(&self) -> Levels {
        use crate::protocol::status::{State, Status};
        let (open, _) = self
            .store()
            .list(&[State::Received, State::Executing], false);
        let mut levels = Levels {
            queries_running: self.queries.busy(),
            ..Levels::default()
        };
        let mut received = 0;
        let mut executing = 0;
        for (env, _, _) in &open {
            match env.status.state() {
                State::Received => received += 1,
                _ => executing += 1,
            }
            if env.status == Status::Pending {
                if env.requires.is_empty() {
                    *levels.pending.entry("(any)".to_owned()).or_default() += 1;
                }
                for capability in &env.requires {
                    *levels.pending.entry(capability.clone()).or_default() += 1;
                }
            }
        }
        levels.threads = vec![("received", received), ("executing", executing)];
        levels
    }
}

/// The thread states, in the order the page lists them.
pub const STATES: [&str; 4] = ["received", "executing", "finished", "canceled"];

/// Most threads one listing returns.
pub const MAX_THREADS: usize = 500;

/// Most ledger movements the page shows (the newest).
const LEDGER_ROWS: usize = 200;

/// How long a view waits for a query worker when the server runs all it may.
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Most records one shelf of the outbox lists (the newest).
const JOB_ROWS: usize = 500;

impl Dashboard<'_> {
    /// The counts the page's header and tabs show: threads by state and status, the outbox,
    /// executors, and pending work by capability.
    pub fn overview(&self) -> Result<Value, Error> {
        let row = self.one(
            "SELECT (SELECT list({'state': state, 'status': status, 'n': n}) FROM \
               (SELECT state, status, count(*) AS n FROM threads WHERE NOT archived GROUP BY ALL)) \
               AS counts, \
             (SELECT list({'capability': capability, 'pending': pending, 'oldest': oldest} \
               ORDER BY pending DESC, capability) FROM pending_by_capability) AS pending",
        )?;
        let mut states: Map<String, Value> =
            STATES.iter().map(|s| (s.to_string(), 0.into())).collect();
        let mut statuses = Map::new();
        for c in row["counts"].as_array().into_iter().flatten() {
            let n = c["n"].as_u64().unwrap_or(0);
            for (map, key) in [(&mut states, "state"), (&mut statuses, "status")] {
                if let Some(k) = c[key].as_str() {
                    let was = map.get(k).and_then(Value::as_u64).unwrap_or(0);
                    map.insert(k.to_owned(), (was + n).into());
                }
            }
        }
        let jobs = self.ex.outbox().jobs();
        let sum = |f: fn(&crate::exchange::jobs::JobCounts) -> usize| -> usize {
            jobs.kinds.values().map(f).sum()
        };
        Ok(json!({
            "now": time::format_timestamp(&self.ex.now()),
            "version": crate::BUILD,
            "home": self.ex.store().layout().root().display().to_string(),
            "states": states,
            "statuses": statuses,
            "jobs": {
                "queued": sum(|k| k.queued),
                "due": sum(|k| k.due),
                "retrying": sum(|k| k.retrying),
                "failed": sum(|k| k.failed),
            },
            "executors": self.ex.directory().executors.len(),
            "pending_by_capability": row["pending"].as_array().cloned().unwrap_or_default(),
        }))
    }

    /// Threads in `state` (every state when empty) whose ref, intent, requestor, executor or
    /// client id contains `search` (case-insensitively), most recently changed first.
    pub fn threads(&self, state: &str, search: &str, limit: usize) -> Result<Value, Error> {
        if !state.is_empty() && !STATES.contains(&state) {
            return Err(crate::protocol::error::ProtocolError::invalid(
                "state",
                format!(
                    "{state:?} is not a state; the states are {}",
                    STATES.join(", ")
                ),
            )
            .into());
        }
        let limit = limit.clamp(1, MAX_THREADS);
        let rows = self.rows(
            &format!(
                "SELECT ref, intent, status, state, requestor, executor, priority, created, \
                 updated, needed_by FROM threads \
                 WHERE NOT archived AND ({state} = '' OR state = {state}) \
                 AND ({search} = '' OR contains(lower(concat_ws(' ', ref, intent, requestor, \
                 executor, client_id)), lower({search}))) \
                 ORDER BY updated DESC, ref DESC LIMIT {}",
                limit + 1,
                state = literal(state),
                search = literal(search),
            ),
            limit + 1,
        )?;
        let truncated = rows.len() > limit;
        Ok(
            json!({"rows": rows.into_iter().take(limit).collect::<Vec<_>>(), "truncated": truncated}),
        )
    }

    /// One thread: its row, history, messages, the routing decision (the executors ranked for
    /// it now, with the rule and the reason) and its jobs; `None` for a thread that does not
    /// exist.
    pub fn thread(&self, reference: &str) -> Result<Option<Value>, Error> {
        let Ok(thread) = ThreadRef::parse(reference) else {
            return Ok(None);
        };
        let r = literal(thread.as_str());
        let row = self.one(&format!(
            "SELECT (SELECT list(t) FROM (SELECT ref, intent, status, state, requestor, executor, \
               priority, created, updated, needed_by, requires FROM threads WHERE ref = {r}) t) \
               AS thread, \
             (SELECT list(h ORDER BY seq) FROM (SELECT seq, \"action\", \"at\", \"by\", note \
               FROM thread_history WHERE ref = {r}) h) AS history, \
             (SELECT list(m ORDER BY seq) FROM (SELECT seq, \"from\", received, kinds \
               FROM messages WHERE ref = {r}) m) AS messages"
        ))?;
        let Some(found) = row["thread"].as_array().and_then(|t| t.first()).cloned() else {
            return Ok(None);
        };
        // Ranking runs only while someone could still be offered the thread; it also fails on
        // a request it cannot read, which must not hide the rest of the thread.
        let route = if found["status"] == "pending" {
            self.rows(
                &format!("SELECT executor, rank, rule, reason FROM route_request({r}, now())"),
                100,
            )
            .unwrap_or_default()
        } else {
            Vec::new()
        };
        let mut jobs = Vec::new();
        let only = std::collections::HashSet::from([thread.to_string()]);
        for shelf in Shelf::ALL {
            let (found, _) = self.ex.store().deliveries_of(shelf, Some(&only));
            jobs.extend(found.iter().map(|d| job_row(d, shelf)));
        }
        Ok(Some(json!({
            "thread": found,
            "history": row["history"].as_array().cloned().unwrap_or_default(),
            "messages": row["messages"].as_array().cloned().unwrap_or_default(),
            "route": route,
            "jobs": jobs,
        })))
    }

    /// Every executor with its availability now, open claims and overall reputation.
    pub fn executors(&self) -> Result<Value, Error> {
        let rows = self.rows(
            "SELECT e.id, e.name, e.capabilities, e.availability, e.schedule, e.timezone, \
             e.source, a.available AS available_now, coalesce(a.active_claims, 0) AS open_claims, \
             coalesce(r.worked, 0) AS worked, coalesce(r.completed, 0) AS completed, \
             coalesce(r.failed, 0) AS failed, r.avg_rating, r.score \
             FROM executors e \
             LEFT JOIN executor_availability a ON a.id = e.id \
             LEFT JOIN executor_reputation r ON r.executor = e.id AND r.capability IS NULL \
             ORDER BY e.id",
            5000,
        )?;
        Ok(json!({"rows": rows}))
    }

    /// The outbox's records on `shelf` (newest first), with every shelf's count.
    pub fn jobs(&self, shelf: &str) -> Result<Value, Error> {
        let Some(wanted) = Shelf::ALL.into_iter().find(|s| s.dir_name() == shelf) else {
            return Err(crate::protocol::error::ProtocolError::invalid(
                "shelf",
                format!("{shelf:?} is not a shelf; the shelves are queue, sent, done, failed"),
            )
            .into());
        };
        let mut counts = Map::new();
        let mut rows = Vec::new();
        for s in Shelf::ALL {
            let (mut found, _) = self.ex.store().deliveries(s);
            counts.insert(s.dir_name().to_owned(), found.len().into());
            if s == wanted {
                found.sort_by(|a, b| b.created.cmp(&a.created).then(b.id.cmp(&a.id)));
                rows = found.iter().take(JOB_ROWS).map(|d| job_row(d, s)).collect();
            }
        }
        Ok(json!({"counts": counts, "rows": rows}))
    }

    /// Every account's balance, and the latest movements of the ledger.
    pub fn shells(&self) -> Result<Value, Error> {
        let row = self.one(&format!(
            "SELECT (SELECT list({{'account': account, 'shells': balance}} ORDER BY account) \
               FROM balances) AS balances, \
             (SELECT list(l ORDER BY \"at\" DESC, id DESC) FROM (SELECT id, \"at\", \"from\", \
               \"to\", shells, kind, thread, note FROM ledger ORDER BY \"at\" DESC, id DESC \
               LIMIT {LEDGER_ROWS}) l) AS ledger"
        ))?;
        Ok(json!({
            "balances": row["balances"].as_array().cloned().unwrap_or_default(),
            "ledger": row["ledger"].as_array().cloned().unwrap_or_default(),
        }))
    }

    /// Requests created and completions per executor on each of the last `days` days (UTC),
    /// from every thread's history: the executors' throughput over time.
    pub fn throughput(&self, days: u32) -> Result<Value, Error> {
        let days = days.clamp(1, 366);
        let today = self.ex.now().with_timezone(&chrono::Utc).date_naive();
        let first = today - chrono::TimeDelta::days(i64::from(days) - 1);
        let rows = self.rows(
            &format!(
                "SELECT strftime(\"at\"::TIMESTAMP, '%Y-%m-%d') AS day, \"action\", \"by\", \
                 count(*) AS n FROM thread_history \
                 WHERE \"action\" IN ('created', 'completed') AND \"at\"::TIMESTAMP >= TIMESTAMP {} \
                 GROUP BY ALL",
                literal(&first.format("%Y-%m-%d 00:00:00").to_string())
            ),
            100_000,
        )?;
        let day_names: Vec<String> = (0..days)
            .map(|i| (first + chrono::TimeDelta::days(i64::from(i))).to_string())
            .collect();
        let slot = |day: &str| day_names.iter().position(|d| d == day);
        let mut created = vec![0u64; day_names.len()];
        let mut series: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
        for row in &rows {
            let (Some(i), Some(n)) = (slot(row["day"].as_str().unwrap_or("")), row["n"].as_u64())
            else {
                continue;
            };
            if row["action"] == "created" {
                created[i] += n;
            } else if let Some(by) = row["by"].as_str() {
                series
                    .entry(by.to_owned())
                    .or_insert_with(|| vec![0; day_names.len()])[i] += n;
            }
        }
        let series: Vec<Value> = series
            .into_iter()
            .map(|(executor, completed)| json!({"executor": executor, "completed": completed}))
            .collect();
        Ok(json!({"days": day_names, "created": created, "series": series}))
    }

    /// The single row of `sql`.
    fn one(&self, sql: &str) -> Result<Value, Error> {
        Ok(self.rows(sql, 1)?.into_iter().next().unwrap_or(Value::Null))
    }

    /// The rows of `sql`, run as the operator (every thread), each as a JSON object with its
    /// times in RFC 3339.
    fn rows(&self, sql: &str, max_rows: usize) -> Result<Vec<Value>, Error> {
        let limits = QueryLimits {
            max_rows,
            max_chars: 8 * 1024 * 1024,
            ..self.ex.sql().query_limits()
        };
        // The page asks for several views at once; beyond the operator's share of query
        // workers a view waits its turn (briefly) instead of failing.
        let started = std::time::Instant::now();
        let answer = loop {
            match self.ex.sql().query(sql, &limits, None) {
                Err(Error::Busy { .. }) if started.elapsed() < BUSY_WAIT => {
                    std::thread::sleep(std::time::Duration::from_millis(25));
                }
                other => break other?,
            }
        };
        Ok(answer
            .json_rows
            .iter()
            .filter_map(|r| serde_json::from_str::<Value>(r).ok())
            .map(rfc3339_times)
            .collect())
    }
}

/// A job record as the page lists it.
fn job_row(d: &Delivery, shelf: Shelf) -> Value {
    let last = d.attempts.last();
    json!({
        "id": d.id,
        "thread": d.thread,
        "executor": d.executor,
        "job": d.job.kind(),
        "channel": d.job.name(),
        "kind": d.kind,
        "shelf": shelf.dir_name(),
        "created": time::format_timestamp(&d.created),
        "due": time::format_timestamp(&d.due),
        "attempts": d.attempts.len(),
        "last_error": last.map(|a| a.error.clone()),
        "last_attempt": last.map(|a| time::format_timestamp(&a.at)),
        "outcome": d.outcome,
    })
}

/// `text` as a SQL string literal. Control characters are dropped: no search needs them, and
/// the statement then holds only printable text.
fn literal(text: &str) -> String {
    let clean: String = text
        .chars()
        .filter(|c| !c.is_control())
        .collect::<String>()
        .replace('\'', "''");
    format!("'{clean}'")
}

/// DuckDB writes TIMESTAMPTZ values as `2026-11-17 05:00:03.181+00`, which browsers do not all
/// read; every such string becomes RFC 3339 (`2026-11-17T05:00:03.181+00:00`).
fn rfc3339_times(v: Value) -> Value {
    match v {
        Value::String(s) => Value::String(rfc3339(&s).unwrap_or(s)),
        Value::Array(items) => Value::Array(items.into_iter().map(rfc3339_times).collect()),
        Value::Object(m) => {
            Value::Object(m.into_iter().map(|(k, v)| (k, rfc3339_times(v))).collect())
        }
        other => other,
    }
}

fn rfc3339(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let shaped = b.len() >= 22
        && b[10] == b' '
        && b[4] == b'-'
        && b[13] == b':'
        && b[..4].iter().all(u8::is_ascii_digit);
    if !shaped {
        return None;
    }
    let at = s.rfind(['+', '-']).filter(|&i| i > 18)?;
    let (when, offset) = s.split_at(at);
    let offset = if offset.len() == 3 {
        format!("{offset}:00")
    } else {
        offset.to_owned()
    };
    let text = format!("{}T{}{offset}", &when[..10], &when[11..]);
    chrono::DateTime::parse_from_rfc3339(&text)
        .ok()
        .map(|_| text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duckdb_times_become_rfc3339_and_other_text_stays() {
        assert_eq!(
            rfc3339("2026-11-17 05:00:03.181+00").as_deref(),
            Some("2026-11-17T05:00:03.181+00:00")
        );
        assert_eq!(
            rfc3339("2026-11-17 05:00:03-08:00").as_deref(),
            Some("2026-11-17T05:00:03-08:00")
        );
        for other in ["check the fridge", "2026-11-17", "2026-11-17 05:00 is when"] {
            assert_eq!(rfc3339(other), None, "{other}");
        }
        let v = rfc3339_times(json!({"a": ["2026-11-17 05:00:03+00"], "b": 1}));
        assert_eq!(v, json!({"a": ["2026-11-17T05:00:03+00:00"], "b": 1}));
    }

    #[test]
    fn literals_cannot_end_early() {
        assert_eq!(literal("it's"), "'it''s'");
        assert_eq!(literal("a\u{0}b\n'; DROP"), "'ab''; DROP'");
    }
}
