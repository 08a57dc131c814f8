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

use std::collections::{BTreeSet, HashMap};

use crate::protocol::ids::ThreadRef;
use crate::store::error::StoreError;
use crate::store::layout::{Layout, Location};
use crate::store::pg::threads::Stored;
use crate::store::pg::{Pg, Run as _, sorted};
use crate::store::thread::ThreadFile;
use crate::store::{fsio, lock};

/// Changes read from the feed at most per pass.
const BATCH: i64 = 2000;

/// Days the change feed keeps its entries: a node or an `/events` client away for longer
/// starts over (a full resync of the mirror; a `lagged` event).
pub const FEED_KEEP_DAYS: i32 = 7;

/// How often at most the follower records its horizon in the mirror.
const SAVE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// One change of the feed that the follower applied to the mirror.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The change's id in the feed.
    pub id: i64,
    /// The follower's horizon when it read the change: every change of a transaction below it
    /// had been applied before (a resume from here misses nothing).
    pub horizon: u64,
    /// The thread as the mirror now holds it.
    pub file: ThreadFile,
}

/// Where a follower stands in the change feed.
#[derive(Debug)]
pub struct Follower {
    /// Every transaction with an id below this had ended when it was read.
    horizon: u64,
    /// The registry's version last written into the mirror.
    registry: Option<(i64, i64)>,
    /// After a full batch: the last id read, where the next pass goes on.
    after: i64,
    /// Changes at or above the horizon already applied (id and transaction id).
    seen: HashMap<i64, u64>,
    /// The horizon last recorded in the mirror, and when.
    saved: u64,
    saved_at: std::time::Instant,
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
        Ok(Follower {
            horizon,
            registry: None,
            after: 0,
            seen: HashMap::new(),
            saved: horizon,
            saved_at: std::time::Instant::now(),
        })
    }

    /// Whether the last pass stopped at a full batch, with more to read at once.
    pub fn behind(&self) -> bool {
        self.after != 0
    }

    /// Applies every change committed since the last pass to the mirror; returns them in
    /// feed order, each with the thread as written.
    pub fn pass(&mut self, pg: &Pg, layout: &Layout) -> Result<Vec<Applied>, StoreError> {
        let since = self.horizon;
        // One statement, so one snapshot: the horizon, the registry's version and the changes
        // are read together (and in one round trip, which under load is most of a pass).
        let mut conn = pg.conn()?;
        let rows = conn
            .query(
                "WITH h AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS horizon, \
                   (SELECT count(*) FROM mess_registry) AS docs, \
                   (SELECT coalesce(max(version), 0) FROM mess_registry) AS newest, \
                   (SELECT coalesce(max(xid), -1) FROM mess_feed_floor) AS floor) \
                 SELECT h.horizon, h.docs, h.newest, c.id, c.xid::text, c.ref, h.floor FROM h \
                 LEFT JOIN LATERAL (SELECT id, xid, ref FROM mess_changes \
                   WHERE xid >= $1::text::xid8 AND id > $2 ORDER BY id LIMIT $3) c ON true",
                &[&self.horizon.to_string(), &self.after, &BATCH],
            )
            .map_err(sorted)?;
        drop(conn);
        let Some(first) = rows.first() else {
            return Ok(Vec::new());
        };
        let horizon: u64 = first.get::<_, &str>(0).parse().unwrap_or(self.horizon);
        let registry = (first.get(1), first.get(2));
        let floor: i64 = first.get(6);
        if u64::try_from(floor).is_ok_and(|f| f >= self.horizon) {
            // Changes this mirror never applied were pruned: it is rebuilt from the threads.
            tracing::warn!(
                horizon = self.horizon,
                floor,
                "the mirror fell behind the change feed; resyncing"
            );
            sync_all(pg, layout)?;
            sync_registry(pg, layout)?;
            self.registry = Some(registry);
            self.horizon = horizon;
            self.after = 0;
            self.seen.clear();
            save_horizon(layout, horizon)?;
            return Ok(Vec::new());
        }
        if self.registry != Some(registry) {
            sync_registry(pg, layout)?;
            self.registry = Some(registry);
        }
        let rows: Vec<(i64, String, String)> = rows
            .iter()
            .filter_map(|r| Some((r.get::<_, Option<i64>>(3)?, r.get(4), r.get(5))))
            .collect();
        let full = i64::try_from(rows.len()).unwrap_or(i64::MAX) >= BATCH;
        let mut fresh: Vec<(i64, String)> = Vec::new();
        for (id, xid, r) in &rows {
            let xid: u64 = xid.parse().unwrap_or(0);
            if self.seen.insert(*id, xid).is_none() {
                fresh.push((*id, r.clone()));
            }
        }
        let refs: BTreeSet<String> = fresh.iter().map(|(_, r)| r.clone()).collect();
        let refs: Vec<String> = refs.into_iter().collect();
        let texts: HashMap<ThreadRef, Stored> = pg.read_many(&refs)?.into_iter().collect();
        let mut written: HashMap<ThreadRef, ThreadFile> = HashMap::new();
        for (thread, stored) in &texts {
            written.insert(thread.clone(), write(layout, thread, stored)?);
        }
        // A full batch leaves later changes unread: the next pass goes on after it, and the
        // horizon stays until a pass has read to the end (changes that commit meanwhile with
        // lower ids are above the horizon, so that pass, from the start, reads them).
        self.after = if full {
            rows.last().map_or(0, |r| r.0)
        } else {
            0
        };
        if !full {
            self.seen.retain(|_, xid| *xid >= horizon);
            self.horizon = horizon;
            // The record is where a restarted follower resumes: an older one only re-applies
            // changes (each write is the database's current text), so once a second will do.
            if horizon != self.saved && self.saved_at.elapsed() >= SAVE_EVERY {
                save_horizon(layout, horizon)?;
                self.saved = horizon;
                self.saved_at = std::time::Instant::now();
            }
        }
        Ok(fresh
            .into_iter()
            .filter_map(|(id, r)| {
                let thread = ThreadRef::parse(&r).ok()?;
                written.get(&thread).map(|file| Applied {
                    id,
                    horizon: since,
                    file: file.clone(),
                })
            })
            .collect())
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
    let mirror = crate::store::FileStore::open(layout.root());
    let files = mirror.files(&crate::protocol::status::State::ALL, true, &mut errors);
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
