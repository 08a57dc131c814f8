//! Threads in the database: one row per thread (its head, status, folder and message count),
//! one append-only row per message document, the client-id and dependency indexes, per-day
//! ref counters, and a change row for every committed write, which the mirrors follow.

use crate::store::postgres::Run;
use chrono::NaiveDate;

use crate::protocol::envelope::Envelope;
use crate::protocol::ids::ThreadRef;
use crate::protocol::status::State;
use crate::store::error::StoreError;
use crate::store::index::{Key, entry_name, newer};
use crate::store::layout::{Layout, Location};
use crate::store::postgres::{Pg, Stored, memo, sorted};
use crate::store::thread::{self, ThreadFile};
use crate::store::{Edit, layout};

/// The folder of a row: its archive month, or the `state=` folder.
pub(crate) fn location_of(state: &str, archive: Option<String>) -> Result<Location, StoreError> {
    match archive {
        Some(month) => Ok(Location::Archive(month)),
        None => State::parse(state)
            .map(Location::State)
            .ok_or_else(|| StoreError::Other {
                message: format!("database: a thread row has the unknown state {state:?}"),
            }),
    }
}

/// Column values of a thread row for `location`.
fn folder_columns(location: &Location, envelope: &Envelope) -> (String, Option<String>) {
    match location {
        Location::State(s) => (s.as_str().to_owned(), None),
        Location::Archive(m) => (envelope.status.state().as_str().to_owned(), Some(m.clone())),
    }
}

/// A thread row's whole text: its head, then its messages in order.
macro_rules! text_of_t {
    () => {
        "t.head || coalesce((SELECT string_agg(m.doc, '' ORDER BY m.seq) \
         FROM mess_messages m WHERE m.ref = t.ref), '')"
    };
}

/// The text, folder and message count of the thread `c.ref` names (for a lateral join).
pub(crate) const TEXT_OF_REF: &str = concat!(
    "SELECT ",
    text_of_t!(),
    " AS text, t.state, t.archive, t.seq FROM mess_threads t WHERE t.ref = c.ref"
);

const SELECT_TEXT: &str = concat!(
    "SELECT ",
    text_of_t!(),
    ", t.state, t.archive, t.seq, t.ref FROM mess_threads t"
);

fn stored(row: &postgres::Row) -> Result<Stored, StoreError> {
    Ok(Stored {
        text: row.get(0),
        location: location_of(row.get::<_, &str>(1), row.get(2))?,
        seq: row.get(3),
    })
}

/// Writes a new thread's rows and its change row in one statement (in `tx`, or alone);
/// `Exists` when the ref is taken.
pub(crate) fn insert(
    tx: &mut impl Run,
    thread: &ThreadRef,
    envelope: &Envelope,
    location: &Location,
    text: &str,
) -> Result<(), StoreError> {
    let (head, docs) = thread::pieces(text);
    let (state, archive) = folder_columns(location, envelope);
    let seq = i32::try_from(docs.len()).unwrap_or(i32::MAX);
    let seqs: Vec<i32> = (1..=seq).collect();
    let inserted: i64 = tx
        .query_one(
            "WITH t AS (INSERT INTO mess_threads \
               (ref, head, seq, status, state, archive, updated, bytes) \
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (ref) DO NOTHING RETURNING ref), \
             m AS (INSERT INTO mess_messages (ref, seq, doc) \
               SELECT t.ref, x.s, x.d FROM t, unnest($9::integer[], $10::text[]) AS x(s, d)), \
             c AS (INSERT INTO mess_changes (ref, seq) SELECT t.ref, $3 FROM t) \
             SELECT count(*) FROM t",
            &[
                &thread.as_str(),
                &head,
                &seq,
                &envelope.status.as_str(),
                &state,
                &archive,
                &crate::protocol::time::format_timestamp(&envelope.updated),
                &i64::try_from(text.len()).unwrap_or(i64::MAX),
                &seqs,
                &docs,
            ],
        )
        .map_err(sorted)?
        .get(0);
    if inserted == 0 {
        return Err(StoreError::Exists {
            thread: thread.to_string(),
        });
    }
    Ok(())
}

fn record_change(tx: &mut impl Run, thread: &ThreadRef, seq: i32) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO mess_changes (ref, seq) VALUES ($1, $2)",
        &[&thread.as_str(), &seq],
    )
    .map_err(sorted)?;
    Ok(())
}

/// Optimistic writes of one change before [`Pg::modify`] locks the row.
const OPTIMISTIC_TRIES: usize = 3;

/// A thread's text with the version of its row (`xmin`: the transaction that wrote it, which
/// every update changes); `NotFound` when there is no such thread. `lock` ends the statement.
fn read_versioned(
    run: &mut impl Run,
    thread: &ThreadRef,
    lock: &str,
) -> Result<(Stored, String), StoreError> {
    let row = run
        .query_opt(
            &format!(
                "SELECT {}, t.state, t.archive, t.seq, t.xmin::text FROM mess_threads t \
                 WHERE t.ref = $1{lock}",
                text_of_t!()
            ),
            &[&thread.as_str()],
        )
        .map_err(sorted)?
        .ok_or_else(|| StoreError::NotFound {
            thread: thread.to_string(),
        })?;
    Ok((stored(&row)?, row.get(4)))
}

/// Writes `edit` over `current` (read at row `version`) in one statement: the new head, the
/// appended documents, the queued notices and the change row, all or nothing, and only if the
/// row is still at `version`. The thread as written and its new version; `None` when the row
/// was not at `version` (another writer came first).
fn write_edit(
    run: &mut impl Run,
    thread: &ThreadRef,
    current: &Stored,
    version: &str,
    file: &ThreadFile,
    edit: &Edit,
) -> Result<Option<(Stored, String)>, StoreError> {
    let location = match &current.location {
        Location::Archive(_) if edit.envelope.status == file.envelope.status => {
            current.location.clone()
        }
        _ => Location::State(edit.envelope.status.state()),
    };
    let text = file.compose(&edit.envelope, &edit.append);
    let (head, docs) = thread::pieces(&text);
    let (_, old_docs) = thread::pieces(&current.text);
    if docs.len() < old_docs.len() || docs[..old_docs.len()] != old_docs[..] {
        return Err(StoreError::Other {
            message: format!(
                "{thread}: a change would rewrite earlier messages, which the database keeps \
                 append-only"
            ),
        });
    }
    let (state, archive) = folder_columns(&location, &edit.envelope);
    let seq = i32::try_from(docs.len()).unwrap_or(i32::MAX);
    let appended: Vec<&str> = docs[old_docs.len()..].to_vec();
    let seqs: Vec<i32> = (1..=appended.len())
        .map(|i| current.seq + i32::try_from(i).unwrap_or(i32::MAX))
        .collect();
    let (ids, notices, dues) = crate::store::postgres::outbox::columns(&edit.deliveries);
    let version = run
        .query_opt(
            "WITH u AS (UPDATE mess_threads SET head = $2, seq = $3, status = $4, state = $5, \
               archive = $6, updated = $7, bytes = $8 \
               WHERE ref = $1 AND xmin::text = $9 RETURNING ref, xmin::text AS version), \
             m AS (INSERT INTO mess_messages (ref, seq, doc) \
               SELECT u.ref, x.s, x.d FROM u, unnest($10::integer[], $11::text[]) AS x(s, d)), \
             o AS (INSERT INTO mess_outbox (id, shelf, doc, due) \
               SELECT x.i, 'queue', x.d, x.due::timestamptz \
               FROM u, unnest($12::text[], $13::text[], $14::text[]) AS x(i, d, due) \
               ON CONFLICT (id) DO NOTHING), \
             c AS (INSERT INTO mess_changes (ref, seq) SELECT u.ref, $3 FROM u) \
             SELECT version FROM u",
            &[
                &thread.as_str(),
                &head,
                &seq,
                &edit.envelope.status.as_str(),
                &state,
                &archive,
                &crate::protocol::time::format_timestamp(&edit.envelope.updated),
                &i64::try_from(text.len()).unwrap_or(i64::MAX),
                &version,
                &seqs,
                &appended,
                &ids,
                &notices,
                &dues,
            ],
        )
        .map_err(sorted)?;
    Ok(version.map(|row| {
        (
            Stored {
                text,
                location,
                seq,
            },
            row.get(0),
        )
    }))
}

impl Pg {
    /// Creates a thread; `Exists` when the ref is taken.
    pub(crate) fn create(
        &self,
        thread: &ThreadRef,
        envelope: &Envelope,
        text: &str,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn()?;
        let location = Location::State(envelope.status.state());
        insert(&mut *conn, thread, envelope, &location, text)?;
        let seq = i32::try_from(thread::pieces(text).1.len()).unwrap_or(i32::MAX);
        let stored = Stored {
            text: text.to_owned(),
            location,
            seq,
        };
        memo::put(thread, &stored, None);
        Ok(())
    }

    /// A thread's text and folder; `None` when the database has no such thread.
    pub(crate) fn read(&self, thread: &ThreadRef) -> Result<Option<Stored>, StoreError> {
        if let Some((known, _)) = memo::get(thread) {
            return Ok(Some(known));
        }
        if memo::open() {
            let mut conn = self.conn()?;
            return match read_versioned(&mut *conn, thread, "") {
                Ok((stored, version)) => {
                    memo::put(thread, &stored, Some(&version));
                    Ok(Some(stored))
                }
                Err(StoreError::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            };
        }
        let mut conn = self.conn()?;
        let row = conn
            .query_opt(
                &format!("{SELECT_TEXT} WHERE t.ref = $1"),
                &[&thread.as_str()],
            )
            .map_err(sorted)?;
        row.as_ref().map(stored).transpose()
    }

    /// The texts of several threads at once (those that exist).
    pub(crate) fn read_many(
        &self,
        threads: &[String],
    ) -> Result<Vec<(ThreadRef, Stored)>, StoreError> {
        let mut conn = self.conn()?;
        let rows = conn
            .query(&format!("{SELECT_TEXT} WHERE t.ref = ANY($1)"), &[&threads])
            .map_err(sorted)?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let r: &str = row.get(4);
            if let Ok(thread) = ThreadRef::parse(r) {
                out.push((thread, stored(row)?));
            }
        }
        Ok(out)
    }

    /// Every thread's ref, in order.
    pub(crate) fn all_refs(&self) -> Result<Vec<String>, StoreError> {
        let mut conn = self.conn()?;
        Ok(conn
            .query("SELECT ref FROM mess_threads ORDER BY ref", &[])
            .map_err(sorted)?
            .iter()
            .map(|r| r.get(0))
            .collect())
    }

    /// A thread's head (its envelope document) and folder, without its messages.
    pub(crate) fn head(
        &self,
        thread: &ThreadRef,
    ) -> Result<Option<(String, Location)>, StoreError> {
        if let Some((known, _)) = memo::get(thread) {
            return Ok(Some((
                thread::pieces(&known.text).0.to_owned(),
                known.location,
            )));
        }
        if memo::open() {
            // The use case will likely write it: the whole text now saves a read then.
            let mut conn = self.conn()?;
            return match read_versioned(&mut *conn, thread, "") {
                Ok((stored, version)) => {
                    memo::put(thread, &stored, Some(&version));
                    Ok(Some((
                        thread::pieces(&stored.text).0.to_owned(),
                        stored.location,
                    )))
                }
                Err(StoreError::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            };
        }
        let mut conn = self.conn()?;
        let row = conn
            .query_opt(
                "SELECT head, state, archive FROM mess_threads WHERE ref = $1",
                &[&thread.as_str()],
            )
            .map_err(sorted)?;
        match row {
            Some(row) => Ok(Some((
                row.get(0),
                location_of(row.get::<_, &str>(1), row.get(2))?,
            ))),
            None => Ok(None),
        }
    }

    /// The heads of every thread in `states` (and of the archive when asked).
    pub(crate) fn heads(
        &self,
        states: &[State],
        archive: bool,
    ) -> Result<Vec<(String, Location)>, StoreError> {
        let mut conn = self.conn()?;
        let states: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
        let rows = conn
            .query(
                "SELECT head, state, archive FROM mess_threads \
                 WHERE (archive IS NULL AND state = ANY($1)) OR ($2 AND archive IS NOT NULL) \
                 ORDER BY ref",
                &[&states, &archive],
            )
            .map_err(sorted)?;
        rows.iter()
            .map(|row| Ok((row.get(0), location_of(row.get::<_, &str>(1), row.get(2))?)))
            .collect()
    }

    /// Changes a thread: `decide` sees the thread as committed and returns what to write,
    /// which commits in one statement (the new head, the appended documents, the notices and
    /// a change row together) only if nobody wrote the thread since it was read; otherwise
    /// `decide` runs again on what the other writer left. After a few such collisions the row
    /// is locked instead (`FOR UPDATE`, so writers on any node take turns). Returns the result
    /// and, when something was written, the new text and folder. `decide` may therefore run
    /// more than once and must only decide.
    pub(crate) fn modify<T, E: From<StoreError>>(
        &self,
        layout: &Layout,
        thread: &ThreadRef,
        mut decide: impl FnMut(&ThreadFile) -> Result<(Option<Edit>, T), E>,
    ) -> Result<(T, Option<Stored>), E> {
        for attempt in 0..OPTIMISTIC_TRIES {
            // No connection is held while deciding: a decision may read the directory.
            let kept = match memo::get(thread) {
                Some((stored, Some(version))) if attempt == 0 => Some((stored, version)),
                _ => None,
            };
            let (current, version) = match kept {
                Some(kept) => kept,
                None => {
                    let mut conn = self.conn()?;
                    read_versioned(&mut *conn, thread, "")?
                }
            };
            let path = layout.thread_path(&current.location, thread);
            let file = ThreadFile::parse(&path, current.location.clone(), current.text.clone())?;
            let (edit, out) = decide(&file)?;
            let Some(edit) = edit else {
                memo::put(thread, &current, Some(&version));
                return Ok((out, None));
            };
            let mut conn = self.conn()?;
            if let Some((written, version)) =
                write_edit(&mut *conn, thread, &current, &version, &file, &edit)?
            {
                memo::put(thread, &written, Some(&version));
                return Ok((out, Some(written)));
            }
        }
        self.modify_locked(layout, thread, decide)
    }

    /// [`Pg::modify`] under the row's lock, for a thread that keeps changing under an
    /// optimistic writer: a second writer on any node waits, then decides on what the first
    /// wrote.
    fn modify_locked<T, E: From<StoreError>>(
        &self,
        layout: &Layout,
        thread: &ThreadRef,
        mut decide: impl FnMut(&ThreadFile) -> Result<(Option<Edit>, T), E>,
    ) -> Result<(T, Option<Stored>), E> {
        let mut conn = self.writer()?;
        let mut tx = conn.transaction().map_err(sorted)?;
        let (current, version) = read_versioned(&mut tx, thread, " FOR UPDATE OF t")?;
        let path = layout.thread_path(&current.location, thread);
        let file = ThreadFile::parse(&path, current.location.clone(), current.text.clone())?;
        let (edit, out) = decide(&file)?;
        let Some(edit) = edit else {
            memo::put(thread, &current, Some(&version));
            return Ok((out, None));
        };
        memo::forget(thread);
        let written = write_edit(&mut tx, thread, &current, &version, &file, &edit)?;
        tx.commit().map_err(sorted)?;
        let Some((written, version)) = written else {
            return Err(StoreError::Other {
                message: format!("{thread} changed while its row was locked"),
            }
            .into());
        };
        memo::put(thread, &written, Some(&version));
        Ok((out, Some(written)))
    }

    /// Moves a finished or canceled thread last updated before `cutoff` to its archive
    /// month; `None` when it no longer qualifies.
    pub(crate) fn archive_one(
        &self,
        thread: &ThreadRef,
        cutoff: &crate::protocol::time::Timestamp,
    ) -> Result<Option<String>, StoreError> {
        let mut conn = self.writer()?;
        let mut tx = conn.transaction().map_err(sorted)?;
        let row = tx
            .query_opt(
                "SELECT head, state, archive, seq FROM mess_threads WHERE ref = $1 FOR UPDATE",
                &[&thread.as_str()],
            )
            .map_err(sorted)?;
        let Some(row) = row else { return Ok(None) };
        let (head, state, archive, seq): (String, String, Option<String>, i32) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        if archive.is_some() || !matches!(state.as_str(), "finished" | "canceled") {
            return Ok(None);
        }
        let file = ThreadFile::parse(std::path::Path::new(""), location_of(&state, None)?, head)?;
        if file.envelope.updated >= *cutoff {
            return Ok(None);
        }
        let month = layout::archive_month(&file.envelope);
        tx.execute(
            "UPDATE mess_threads SET archive = $2 WHERE ref = $1",
            &[&thread.as_str(), &month],
        )
        .map_err(sorted)?;
        record_change(&mut tx, thread, seq)?;
        memo::forget(thread);
        tx.commit().map_err(sorted)?;
        Ok(Some(month))
    }

    /// Allocates `n` consecutive refs for `date` from the day's counter (one row per day,
    /// updated in place, so two nodes never hand out one ref).
    pub(crate) fn allocate_refs(
        &self,
        date: NaiveDate,
        n: usize,
    ) -> Result<Vec<ThreadRef>, StoreError> {
        let count = i64::try_from(n).unwrap_or(i64::MAX);
        let mut conn = self.conn()?;
        // Every create takes the day's row, so it is held only until its commit is written,
        // not flushed: a commit that is lost in a crash takes nothing durable with it, since
        // whatever uses a ref (its index entries, its thread) commits later, and flushing that
        // commit flushes this one first. (The day and count are formatted here, not quoted
        // input: a parameterless batch is what lets the setting and the statement share one
        // round trip.)
        let answer = conn
            .simple_query(&format!(
                "SET LOCAL synchronous_commit = off; \
                 INSERT INTO mess_ref_days (day, last) VALUES ('{}', {count}) \
                 ON CONFLICT (day) DO UPDATE SET last = mess_ref_days.last + EXCLUDED.last \
                 RETURNING last",
                date.format("%Y-%m-%d")
            ))
            .map_err(sorted)?;
        let last: i64 = answer
            .iter()
            .find_map(|m| match m {
                postgres::SimpleQueryMessage::Row(row) => row.get(0)?.parse().ok(),
                _ => None,
            })
            .ok_or_else(|| StoreError::Other {
                message: "database: the day's ref counter returned no value".to_owned(),
            })?;
        let first = u64::try_from(last - count + 1).unwrap_or(1);
        Ok((0..n as u64)
            .map(|i| ThreadRef::from_serial(date, first + i))
            .collect())
    }

    /// Points index entries of `sender` at threads; `last` entries only move forward. One
    /// statement (the forward-only rule is its condition), so one round trip.
    pub(crate) fn remember(
        &self,
        sender: &str,
        entries: &[(Key<'_>, &ThreadRef)],
    ) -> Result<(), StoreError> {
        // One row per key, as applying the entries in order would leave it.
        let mut rows: Vec<(String, &ThreadRef)> = Vec::new();
        for (key, thread) in entries {
            let name = entry_name(*key);
            let forward_only = matches!(key, Key::Last | Key::LastWork);
            match rows.iter_mut().find(|(n, _)| *n == name) {
                Some((_, at)) if !forward_only || !newer(at, thread) => *at = *thread,
                Some(_) => {}
                None => rows.push((name, *thread)),
            }
        }
        if rows.is_empty() {
            return Ok(());
        }
        let keys: Vec<&str> = rows.iter().map(|(k, _)| k.as_str()).collect();
        let refs: Vec<&str> = rows.iter().map(|(_, r)| r.as_str()).collect();
        let mut conn = self.conn()?;
        // A ref's order: its day, then its serial (by length, then digits).
        conn.execute(
            "INSERT INTO mess_index AS i (sender, key, ref) \
             SELECT $1, k, r FROM unnest($2::text[], $3::text[]) AS x(k, r) \
             ON CONFLICT (sender, key) DO UPDATE SET ref = EXCLUDED.ref \
             WHERE i.key NOT IN ('last', 'work-last') \
                OR (left(i.ref, 10), length(i.ref), i.ref) \
                   <= (left(EXCLUDED.ref, 10), length(EXCLUDED.ref), EXCLUDED.ref)",
            &[&sender, &keys, &refs],
        )
        .map_err(sorted)?;
        Ok(())
    }

    /// Looks an index entry of `sender` up.
    pub(crate) fn lookup(
        &self,
        sender: &str,
        key: Key<'_>,
    ) -> Result<Option<ThreadRef>, StoreError> {
        let mut conn = self.conn()?;
        let row = conn
            .query_opt(
                "SELECT ref FROM mess_index WHERE sender = $1 AND key = $2",
                &[&sender, &entry_name(key)],
            )
            .map_err(sorted)?;
        Ok(row.and_then(|r| ThreadRef::parse(r.get::<_, &str>(0)).ok()))
    }

    /// Records that `dependent` waits for `dependency`.
    pub(crate) fn add_dependent(
        &self,
        dependency: &ThreadRef,
        dependent: &ThreadRef,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn()?;
        conn.execute(
            "INSERT INTO mess_dependents (dependency, dependent) VALUES ($1, $2) \
             ON CONFLICT DO NOTHING",
            &[&dependency.as_str(), &dependent.as_str()],
        )
        .map_err(sorted)?;
        Ok(())
    }

    /// The threads that wait for `dependency`.
    pub(crate) fn dependents(&self, dependency: &ThreadRef) -> Result<Vec<ThreadRef>, StoreError> {
        let mut conn = self.conn()?;
        let rows = conn
            .query(
                "SELECT dependent FROM mess_dependents WHERE dependency = $1 ORDER BY dependent",
                &[&dependency.as_str()],
            )
            .map_err(sorted)?;
        Ok(rows
            .iter()
            .filter_map(|r| ThreadRef::parse(r.get::<_, &str>(0)).ok())
            .collect())
    }
}
