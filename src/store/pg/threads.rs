//! Threads in the database: one row per thread (its head, status, folder and message count),
//! one append-only row per message document, the client-id and dependency indexes, per-day
//! ref counters, and a change row for every committed write, which the mirrors follow.

use crate::store::pg::Run;
use chrono::NaiveDate;

use crate::protocol::envelope::Envelope;
use crate::protocol::ids::ThreadRef;
use crate::protocol::status::State;
use crate::store::error::StoreError;
use crate::store::index::{Key, entry_name, newer};
use crate::store::layout::{Layout, Location};
use crate::store::pg::{Pg, memo, sorted};
use crate::store::thread::{self, ThreadFile};
use crate::store::{Edit, layout};

/// A thread as the database holds it.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    /// The whole MESSE-AF text.
    pub text: String,
    /// Where the thread's file lives (in every mirror).
    pub location: Location,
    /// Message documents.
    pub seq: i32,
}

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

/// Writes a new thread's rows and its change row in `tx`; `Exists` when the ref is taken.
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
    let inserted = tx
        .execute(
            "INSERT INTO mess_threads (ref, head, seq, status, state, archive, updated, bytes) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (ref) DO NOTHING",
            &[
                &thread.as_str(),
                &head,
                &seq,
                &envelope.status.as_str(),
                &state,
                &archive,
                &crate::protocol::time::format_timestamp(&envelope.updated),
                &i64::try_from(text.len()).unwrap_or(i64::MAX),
            ],
        )
        .map_err(sorted)?;
    if inserted == 0 {
        return Err(StoreError::Exists {
            thread: thread.to_string(),
        });
    }
    append_docs(tx, thread, 0, &docs)?;
    record_change(tx, thread, seq)
}

fn append_docs(
    tx: &mut impl Run,
    thread: &ThreadRef,
    after: i32,
    docs: &[&str],
) -> Result<(), StoreError> {
    if docs.is_empty() {
        return Ok(());
    }
    let seqs: Vec<i32> = (1..=docs.len())
        .map(|i| after + i32::try_from(i).unwrap_or(i32::MAX))
        .collect();
    tx.execute(
        "INSERT INTO mess_messages (ref, seq, doc) \
         SELECT $1, s, d FROM unnest($2::integer[], $3::text[]) AS x(s, d)",
        &[&thread.as_str(), &seqs, &docs],
    )
    .map_err(sorted)?;
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

impl Pg {
    /// Creates a thread; `Exists` when the ref is taken.
    pub(crate) fn create(
        &self,
        thread: &ThreadRef,
        envelope: &Envelope,
        text: &str,
    ) -> Result<(), StoreError> {
        let mut conn = self.writer()?;
        let mut tx = conn.transaction().map_err(sorted)?;
        let location = Location::State(envelope.status.state());
        insert(&mut tx, thread, envelope, &location, text)?;
        tx.commit().map_err(sorted)?;
        memo::put(thread, thread::pieces(text).0, &location);
        Ok(())
    }

    /// A thread's text and folder; `None` when the database has no such thread.
    pub(crate) fn read(&self, thread: &ThreadRef) -> Result<Option<Stored>, StoreError> {
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
        if let Some(known) = memo::get(thread) {
            return Ok(Some(known));
        }
        let mut conn = self.conn()?;
        let row = conn
            .query_opt(
                "SELECT head, state, archive FROM mess_threads WHERE ref = $1",
                &[&thread.as_str()],
            )
            .map_err(sorted)?;
        match row {
            Some(row) => {
                let (head, location): (String, Location) =
                    (row.get(0), location_of(row.get::<_, &str>(1), row.get(2))?);
                memo::put(thread, &head, &location);
                Ok(Some((head, location)))
            }
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

    /// Changes a thread in one transaction: the row is locked (`FOR UPDATE`, so a second
    /// writer on any node waits and then decides on what the first wrote), `decide` sees the
    /// thread as committed, and the new head, the appended documents and a change row commit
    /// together. Returns the result and, when something was written, the new text and folder.
    pub(crate) fn modify<T, E: From<StoreError>>(
        &self,
        layout: &Layout,
        thread: &ThreadRef,
        decide: impl FnOnce(&ThreadFile) -> Result<(Option<Edit>, T), E>,
    ) -> Result<(T, Option<Stored>), E> {
        let mut conn = self.writer()?;
        let mut tx = conn.transaction().map_err(sorted)?;
        let row = tx
            .query_opt(
                &format!("{SELECT_TEXT} WHERE t.ref = $1 FOR UPDATE OF t"),
                &[&thread.as_str()],
            )
            .map_err(sorted)?;
        let Some(row) = row else {
            return Err(StoreError::NotFound {
                thread: thread.to_string(),
            }
            .into());
        };
        let current = stored(&row)?;
        let path = layout.thread_path(&current.location, thread);
        let file = ThreadFile::parse(&path, current.location.clone(), current.text.clone())?;
        let (edit, out) = decide(&file)?;
        let Some(edit) = edit else {
            memo::put(thread, thread::pieces(&current.text).0, &current.location);
            return Ok((out, None));
        };
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
            }
            .into());
        }
        let (state, archive) = folder_columns(&location, &edit.envelope);
        let seq = i32::try_from(docs.len()).unwrap_or(i32::MAX);
        tx.execute(
            "UPDATE mess_threads SET head = $2, seq = $3, status = $4, state = $5, archive = $6, \
             updated = $7, bytes = $8 WHERE ref = $1",
            &[
                &thread.as_str(),
                &head,
                &seq,
                &edit.envelope.status.as_str(),
                &state,
                &archive,
                &crate::protocol::time::format_timestamp(&edit.envelope.updated),
                &i64::try_from(text.len()).unwrap_or(i64::MAX),
            ],
        )
        .map_err(sorted)?;
        append_docs(&mut tx, thread, current.seq, &docs[old_docs.len()..])?;
        for delivery in &edit.deliveries {
            crate::store::pg::outbox::enqueue_in(&mut tx, delivery)?;
        }
        record_change(&mut tx, thread, seq)?;
        memo::forget(thread);
        tx.commit().map_err(sorted)?;
        memo::put(thread, head, &location);
        Ok((
            out,
            Some(Stored {
                text,
                location,
                seq,
            }),
        ))
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
        let last: i64 = conn
            .query_one(
                "INSERT INTO mess_ref_days (day, last) VALUES ($1::text::date, $2) \
                 ON CONFLICT (day) DO UPDATE SET last = mess_ref_days.last + EXCLUDED.last \
                 RETURNING last",
                &[&date.format("%Y-%m-%d").to_string(), &count],
            )
            .map_err(sorted)?
            .get(0);
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
