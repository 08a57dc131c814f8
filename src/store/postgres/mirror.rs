//! A node's read-only mirror of the database: the MESSE-AF files of every thread, written in
//! the home's `state=` folders and archive exactly as tier 0 would hold them, so every reader of
//! files (the views, routing SQL, `mess query`, the duckdb CLI, `grep`) works on any node.
//!
//! A follower reads the change feed and rewrites the files of the threads that changed, always
//! with the text the database holds when it writes (so the last write wins in every order).
//! The feed's ids are handed out before commit, so a change with a lower id can become visible
//! after one with a higher id; the follower therefore tracks the snapshot horizon (every
//! transaction below it has ended) and re-reads everything at or above it, skipping what it has
//! already seen: nothing committed is missed, whatever the order of commits.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::protocol::envelope::Envelope;
use crate::protocol::ids::ThreadRef;
use crate::store::error::StoreError;
use crate::store::layout::{Layout, Location};
use crate::store::postgres::Stored;
use crate::store::postgres::threads::{TEXT_OF_REF, location_of};
use crate::store::postgres::{Pg, Run as _, sorted};
use crate::store::thread::ThreadFile;
use crate::store::{fsio, lock};

/// Changes read from the feed at most per pass.
const BATCH: i64 = 2000;

/// Days the change feed keeps its entries: a node or an `/events` client away for longer
/// starts over (a full resync of the mirror; a `lagged` event).
pub const FEED_KEEP_DAYS: i32 = 7;

/// How often at most the follower records its horizon in the mirror.
const SAVE_EVERY: Duration = Duration::from_secs(1);

/// How often at most the follower writes the mirror's files: the first change after a quiet
/// spell is written at once, later ones gather and are written together, each thread once
/// with its newest text (under load a thread changes several times in that span, and every
/// write costs a new file and a rename on every node).
const WRITE_EVERY: Duration = Duration::from_millis(250);

/// The shortest time between two passes while changes keep coming: one statement then reads
/// the changes of several commits, instead of one per commit and node.
pub const PASS_EVERY: Duration = Duration::from_millis(10);

/// One change of the feed that the follower applied to the mirror.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The change's id in the feed.
    pub id: i64,
    /// The follower's horizon when it read the change: every change of a transaction below it
    /// had been applied before (a resume from here misses nothing).
    pub horizon: u64,
    /// The thread's envelope as the mirror holds it (or will, at the next write of the mirror).
    pub envelope: Envelope,
}

/// Where a follower stands in the change feed.
#[derive(Debug)]
pub struct Follower {
    /// Every transaction with an id below this had ended when it was read.
    horizon: u64,
    /// The registry's version last written into the mirror.
    registry: Option<(i64, i64)>,
    /// The newest ledger movement last written into the mirror.
    ledger: Option<i64>,
    /// Whether the last pass read a full batch (more may be waiting).
    full: bool,
    /// Changes at or above the horizon already applied (id and transaction id).
    seen: HashMap<i64, u64>,
    /// The horizon last recorded in the mirror, and when.
    saved: u64,
    saved_at: Instant,
    /// Threads read but not yet written to the mirror, with their newest text.
    unwritten: HashMap<ThreadRef, Stored>,
    /// When the mirror's files were last written.
    written_at: Instant,
}

impl Follower {
    /// A follower that starts where the mirror of `layout` left off; a mirror with no record
    /// of that is brought up to date in full first.
    pub fn start(pg: &Pg, layout: &Layout) -> Result<Follower, StoreError> {
        let recorded = fsio::read_optional(&layout.mirror_horizon_file())?
            .and_then(|t| t.trim().parse::<u64>().ok());
        let horizon = match recorded {
            Some(h) => h,
            None => {
                let horizon = current_horizon(pg)?;
                sync_all(pg, layout)?;
                sync_registry(pg, layout)?;
                save_horizon(layout, horizon)?;
                horizon
            }
        };
        let long_ago = Instant::now()
            .checked_sub(WRITE_EVERY)
            .unwrap_or_else(Instant::now);
        Ok(Follower {
            horizon,
            registry: None,
            ledger: None,
            full: false,
            seen: HashMap::new(),
            saved: horizon,
            saved_at: Instant::now(),
            unwritten: HashMap::new(),
            written_at: long_ago,
        })
    }

    /// Whether the last pass stopped at a full batch, with more to read at once.
    pub fn behind(&self) -> bool {
        self.full
    }

    /// How long until threads read but not yet written are due in the mirror (`None` when
    /// there are none): the longest the follower may wait before its next pass.
    pub fn write_due(&self) -> Option<Duration> {
        (!self.unwritten.is_empty()).then(|| WRITE_EVERY.saturating_sub(self.written_at.elapsed()))
    }

    /// Reads every change committed since the last pass; returns them in feed order, each
    /// with the thread as it now is. Their files are written by [`Follower::write`] once
    /// [`Follower::write_due`] says so.
    pub fn pass(&mut self, pg: &Pg, layout: &Layout) -> Result<Vec<Applied>, StoreError> {
        let since = self.horizon;
        let seen: Vec<i64> = self.seen.keys().copied().collect();
        // One statement, so one snapshot and one round trip: the horizon, the registry's
        // version, the changes not applied yet and the text of each thread they name (once).
        // The changes are walked in transaction-id order from the horizon with a fixed limit,
        // so the cached (generic) plan reads them through the `xid` index whatever the feed's
        // size: with a second range on `id`, PostgreSQL scanned the whole feed by id on every
        // pass (a week of changes). Changes already applied are skipped through a hash.
        let mut conn = pg.conn()?;
        let rows = conn
            .query(
                &format!(
                    "WITH h AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS horizon, \
                       (SELECT count(*) FROM mess_registry) AS docs, \
                       (SELECT coalesce(max(version), 0) FROM mess_registry) AS newest, \
                       (SELECT coalesce(max(xid), -1) FROM mess_feed_floor) AS floor, \
                       (SELECT coalesce(max(seq), 0) FROM mess_ledger) AS ledger), \
                     r AS MATERIALIZED (SELECT id, xid, ref FROM mess_changes \
                       WHERE xid >= $1::text::xid8 AND id NOT IN (SELECT unnest($2::bigint[])) \
                       ORDER BY xid LIMIT {BATCH}), \
                     c AS (SELECT id, xid, ref, \
                       row_number() OVER (PARTITION BY ref ORDER BY id DESC) AS newest_of_ref \
                       FROM r) \
                     SELECT h.horizon, h.docs, h.newest, h.floor, h.ledger, c.id, c.xid::text, c.ref, \
                       s.text, s.state, s.archive, s.seq FROM h \
                     LEFT JOIN c ON true \
                     LEFT JOIN LATERAL ({TEXT_OF_REF}) s ON c.newest_of_ref = 1 \
                     ORDER BY c.id"
                ),
                &[&self.horizon.to_string(), &seen],
            )
            .map_err(sorted)?;
        drop(conn);
        let Some(first) = rows.first() else {
            return Ok(Vec::new());
        };
        let horizon: u64 = first.get::<_, &str>(0).parse().unwrap_or(self.horizon);
        let registry = (first.get(1), first.get(2));
        let floor: i64 = first.get(3);
        let ledger: i64 = first.get(4);
        if u64::try_from(floor).is_ok_and(|f| f >= self.horizon) {
            // Changes this mirror never applied were pruned: it is rebuilt from the threads.
            tracing::warn!(
                horizon = self.horizon,
                floor,
                "the mirror fell behind the change feed; resyncing"
            );
            self.unwritten.clear();
            sync_all(pg, layout)?;
            sync_registry(pg, layout)?;
            self.registry = Some(registry);
            self.horizon = horizon;
            self.full = false;
            self.seen.clear();
            save_horizon(layout, horizon)?;
            return Ok(Vec::new());
        }
        if self.registry != Some(registry) {
            sync_registry(pg, layout)?;
            self.registry = Some(registry);
        }
        if self.ledger != Some(ledger) {
            sync_ledger(pg, layout)?;
            self.ledger = Some(ledger);
        }
        let mut fresh: Vec<(i64, ThreadRef)> = Vec::new();
        let mut files: HashMap<ThreadRef, Envelope> = HashMap::new();
        for row in &rows {
            let Some(id) = row.get::<_, Option<i64>>(5) else {
                continue;
            };
            let xid: u64 = row.get::<_, &str>(6).parse().unwrap_or(0);
            self.seen.insert(id, xid);
            let Ok(thread) = ThreadRef::parse(row.get::<_, &str>(7)) else {
                continue;
            };
            if let Some(text) = row.get::<_, Option<String>>(8) {
                let stored = Stored {
                    text,
                    location: location_of(row.get::<_, &str>(9), row.get(10))?,
                    seq: row.get(11),
                };
                // Announcing needs only the envelope: the head alone is parsed.
                let path = layout.thread_path(&stored.location, &thread);
                let head = crate::store::thread::pieces(&stored.text).0.to_owned();
                files.insert(
                    thread.clone(),
                    ThreadFile::parse(&path, stored.location.clone(), head)?.envelope,
                );
                self.unwritten.insert(thread.clone(), stored);
            }
            fresh.push((id, thread));
        }
        // A full batch leaves later changes unread: the horizon stays until a pass has read to
        // the end, and what was read is skipped as seen. (Going on from the last change read
        // would miss a transaction below it that was still running and commits later.)
        self.full = i64::try_from(fresh.len()).unwrap_or(i64::MAX) >= BATCH;
        if !self.full {
            self.seen.retain(|_, xid| *xid >= horizon);
            self.horizon = horizon;
        }
        Ok(fresh
            .into_iter()
            .filter_map(|(id, thread)| {
                files.get(&thread).map(|envelope| Applied {
                    id,
                    horizon: since,
                    envelope: envelope.clone(),
                })
            })
            .collect())
    }

    /// Writes the threads read since the last write into the mirror, then (at most once a
    /// second) records the horizon: every change below it is now in the files, so a restarted
    /// follower resumes there and misses nothing.
    pub fn write(&mut self, layout: &Layout) -> Result<(), StoreError> {
        let threads: Vec<ThreadRef> = self.unwritten.keys().cloned().collect();
        for thread in threads {
            // Each leaves the list only once written: a failed write is tried again later.
            if let Some(stored) = self.unwritten.get(&thread) {
                write(layout, &thread, stored)?;
                self.unwritten.remove(&thread);
            }
        }
        self.written_at = Instant::now();
        if !self.full && self.horizon != self.saved && self.saved_at.elapsed() >= SAVE_EVERY {
            save_horizon(layout, self.horizon)?;
            self.saved = self.horizon;
            self.saved_at = Instant::now();
        }
        Ok(())
    }
}

/// Writes the registrations and routing rules of the database into the mirror
/// (`executors/<id>.yaml`, `routing.yaml`), where the views and routing SQL read them, and
/// removes registrations the database no longer has.
pub fn sync_registry(pg: &Pg, layout: &Layout) -> Result<(), StoreError> {
    let docs = pg.registry_docs()?;
    let dir = layout.registrations_dir();
    let mut keep = std::collections::HashSet::new();
    let mut routing = false;
    for (name, doc) in &docs {
        let path = match name.strip_prefix("executors/") {
            Some(stem) => dir.join(format!("{stem}.yaml")),
            None if name == "routing" => {
                routing = true;
                layout.routing_file()
            }
            None => continue,
        };
        keep.insert(path.clone());
        if fsio::read_optional(&path)?.as_deref() != Some(doc.as_str()) {
            fsio::ensure_dir(path.parent().unwrap_or(layout.root()))?;
            fsio::replace_unsynced(&path, doc.as_bytes())?;
        }
    }
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|x| x == "yaml") && !keep.contains(&path) {
                fsio::remove_durable(&path)?;
            }
        }
    }
    if !routing {
        fsio::remove_durable(&layout.routing_file())?;
    }
    Ok(())
}

/// Writes the shells ledger of the database into the mirror's `ledger/YYYY-MM.yaml`, the
/// files tier 0 keeps, where the `ledger` and `balances` views read it.
pub fn sync_ledger(pg: &Pg, layout: &Layout) -> Result<(), StoreError> {
    let mut months: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    for (month, doc) in pg.ledger_docs()? {
        let text = months.entry(month).or_default();
        text.push_str("---\n");
        text.push_str(&doc);
    }
    let dir = layout.root().join("ledger");
    let _lock = lock::acquire(&layout.locks_dir(), "ledger")?;
    for (month, text) in &months {
        let path = dir.join(format!("{month}.yaml"));
        if fsio::read_optional(&path)?.as_deref() != Some(text.as_str()) {
            fsio::ensure_dir(&dir)?;
            fsio::replace_unsynced(&path, text.as_bytes())?;
        }
    }
    Ok(())
}

fn current_horizon(pg: &Pg) -> Result<u64, StoreError> {
    let mut conn = pg.conn()?;
    let h: String = conn
        .query_one("SELECT pg_snapshot_xmin(pg_current_snapshot())::text", &[])
        .map_err(sorted)?
        .get(0);
    Ok(h.parse().unwrap_or(0))
}

fn save_horizon(layout: &Layout, horizon: u64) -> Result<(), StoreError> {
    let path = layout.mirror_horizon_file();
    fsio::ensure_dir(&layout.internal_dir())?;
    fsio::replace_unsynced(&path, format!("{horizon}\n").as_bytes())
}

/// Writes every thread of the database whose mirror file is missing or of another length;
/// returns how many files were written.
pub fn sync_all(pg: &Pg, layout: &Layout) -> Result<usize, StoreError> {
    let mut conn = pg.conn()?;
    let rows = conn
        .query(
            "SELECT ref, state, archive, bytes FROM mess_threads ORDER BY ref",
            &[],
        )
        .map_err(sorted)?;
    drop(conn);
    let mut stale = Vec::new();
    for row in &rows {
        let Ok(thread) = ThreadRef::parse(row.get::<_, &str>(0)) else {
            continue;
        };
        let location = match row.get::<_, Option<String>>(2) {
            Some(month) => Location::Archive(month),
            None => match crate::protocol::status::State::parse(row.get::<_, &str>(1)) {
                Some(s) => Location::State(s),
                None => continue,
            },
        };
        let bytes: i64 = row.get(3);
        let path = layout.thread_path(&location, &thread);
        let current = std::fs::metadata(&path).ok().map(|m| m.len());
        if current != u64::try_from(bytes).ok() {
            stale.push(thread.to_string());
        }
    }
    let mut written = 0;
    for chunk in stale.chunks(500) {
        for (thread, stored) in pg.read_many(chunk)? {
            write(layout, &thread, &stored)?;
            written += 1;
        }
    }
    Ok(written)
}

/// Writes one thread's mirror file under the mirror's thread lock (the same lock tier 0's
/// writers take, so readers of the home see whole files) and removes copies left in other
/// folders by earlier states.
pub(crate) fn write(
    layout: &Layout,
    thread: &ThreadRef,
    stored: &Stored,
) -> Result<ThreadFile, StoreError> {
    let _guard = lock::acquire(&layout.locks_dir(), &lock::thread_lock_name(thread))?;
    let path = layout.thread_path(&stored.location, thread);
    fsio::ensure_dir(&layout.dir(&stored.location))?;
    let unchanged = fsio::read_optional(&path)?.is_some_and(|t| t == stored.text);
    if !unchanged {
        fsio::replace_unsynced(&path, stored.text.as_bytes())?;
    }
    for location in other_locations(layout, thread, &stored.location)? {
        for stale in layout.thread_paths(&location, thread) {
            if stale != path && stale.exists() {
                std::fs::remove_file(&stale).map_err(|e| StoreError::io(&stale, e))?;
            }
        }
    }
    ThreadFile::parse(&path, stored.location.clone(), stored.text.clone())
}

/// Every folder a thread's file could be in besides `here`.
fn other_locations(
    layout: &Layout,
    thread: &ThreadRef,
    here: &Location,
) -> Result<Vec<Location>, StoreError> {
    let mut out: Vec<Location> = crate::protocol::status::State::ALL
        .into_iter()
        .map(Location::State)
        .collect();
    if let Some((date, _)) = thread.date_serial() {
        out.push(Location::Archive(date.format("%Y-%m").to_string()));
    }
    if let Location::Archive(m) = here
        && !out.contains(&Location::Archive(m.clone()))
    {
        out.push(here.clone());
    }
    let _ = layout;
    Ok(out.into_iter().filter(|l| l != here).collect())
}

/// Checks the mirror of `layout` against the database, thread by thread and byte for byte:
/// files that differ or are missing, and files of threads the database does not have or
/// keeps in another folder. `repair` rewrites the first and removes the second.
pub fn fsck(
    pg: &Pg,
    layout: &Layout,
    repair: bool,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<crate::store::fsck::FsckReport, StoreError> {
    let mut report = crate::store::fsck::FsckReport::default();
    let refs = pg.all_refs()?;
    let mut expected: std::collections::HashSet<std::path::PathBuf> =
        std::collections::HashSet::new();
    let total = refs.len();
    report.threads = total;
    for (n, chunk) in refs.chunks(500).enumerate() {
        progress(n * 500, total);
        for (thread, stored) in pg.read_many(chunk)? {
            let path = layout.thread_path(&stored.location, &thread);
            expected.insert(path.clone());
            let on_disk = fsio::read_optional(&path)?;
            let problem = match on_disk {
                Some(text) if text == stored.text => continue,
                Some(_) => "differs from the database",
                None => "missing from the mirror",
            };
            if repair {
                write(layout, &thread, &stored)?;
            }
            report.note(&path, problem, repair);
        }
    }
    progress(total, total);
    let mut errors = Vec::new();
    let mirror = crate::store::Store::open(layout.root());
    let files = mirror.files_in(&crate::protocol::status::State::ALL, true, &mut errors);
    report.files = files.len();
    for (_, path) in files {
        if expected.contains(&path) {
            continue;
        }
        if repair {
            fsio::remove_durable(&path)?;
        }
        report.note(
            &path,
            "not in the database (or in another folder there)",
            repair,
        );
    }
    Ok(report)
}

impl Pg {
    /// The threads changed by transactions at or above `horizon`, each once with its latest
    /// change id, oldest first; at most `limit`.
    pub(crate) fn changed_since(
        &self,
        horizon: u64,
        limit: usize,
    ) -> Result<Option<Vec<(ThreadRef, i64)>>, StoreError> {
        let mut conn = self.conn()?;
        let floor: i64 = conn
            .query_one("SELECT coalesce(max(xid), -1) FROM mess_feed_floor", &[])
            .map_err(sorted)?
            .get(0);
        if u64::try_from(floor).is_ok_and(|f| f >= horizon) {
            return Ok(None);
        }
        let rows = conn
            .query(
                "SELECT ref, max(id) AS last FROM mess_changes WHERE xid >= $1::text::xid8 \
                 GROUP BY ref ORDER BY last LIMIT $2",
                &[
                    &horizon.to_string(),
                    &i64::try_from(limit).unwrap_or(i64::MAX),
                ],
            )
            .map_err(sorted)?;
        Ok(Some(
            rows.iter()
                .filter_map(|r| Some((ThreadRef::parse(r.get::<_, &str>(0)).ok()?, r.get(1))))
                .collect(),
        ))
    }

    /// Deletes the change feed's entries older than [`FEED_KEEP_DAYS`] and records the newest
    /// transaction id deleted; returns how many went.
    pub(crate) fn prune_changes(&self) -> Result<i64, StoreError> {
        let mut conn = self.conn()?;
        Ok(conn
            .query_one(
                "WITH gone AS (DELETE FROM mess_changes \
                   WHERE at < now() - make_interval(days => $1) RETURNING xid::text::bigint AS x), \
                 floor AS (INSERT INTO mess_feed_floor (id, xid) \
                   SELECT true, max(x) FROM gone HAVING count(*) > 0 \
                   ON CONFLICT (id) DO UPDATE SET xid = greatest(mess_feed_floor.xid, EXCLUDED.xid)) \
                 SELECT count(*) FROM gone",
                &[&FEED_KEEP_DAYS],
            )
            .map_err(sorted)?
            .get(0))
    }
}
