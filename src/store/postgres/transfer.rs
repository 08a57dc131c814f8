//! Moving a home between the tiers: `import` copies a home's threads (and the indexes and ref
//! counters that go with them, and the keys, registry and ledger: `transfer_shared`) into the
//! database, `export` writes the database back out as a home. Thread texts cross unchanged,
//! byte for byte, both ways.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::protocol::ids::ThreadRef;
use crate::protocol::status::State;
use crate::store::error::StoreError;
use crate::store::fsck::IndexFacts;
use crate::store::index::{self, Key, entry_name};
use crate::store::layout::{Layout, Location};
use crate::store::postgres::session::Tx;
use crate::store::postgres::threads::insert;
use crate::store::postgres::transfer_shared::SharedReport;
use crate::store::postgres::transfer_shared::import_shared;
use crate::store::postgres::{Pg, Run as _, sorted};
use crate::store::thread::{Freshness, ThreadFile};
use crate::store::{Store, fsio, layout, refs};

/// Threads written per transaction.
const CHUNK: usize = 500;

/// What an import did. An import is one transaction: when anything is refused, nothing of it
/// was written.
#[derive(Debug, Default)]
pub struct ImportReport {
    /// Whether the import was committed (nothing was refused).
    pub committed: bool,
    /// Threads copied into the database.
    pub imported: usize,
    /// Threads the database had already (same ref), left as they were.
    pub present: usize,
    /// Files that were not copied, and why.
    pub refused: Vec<(PathBuf, String)>,
    /// Index entries written.
    pub index_entries: usize,
    /// Keys, registrations and ledger movements copied.
    pub shared: SharedReport,
}

/// What an export did.
#[derive(Debug, Default)]
pub struct ExportReport {
    /// Thread files written.
    pub threads: usize,
    /// Index entries written.
    pub index_entries: usize,
    /// Keys, registrations and ledger movements written.
    pub shared: SharedReport,
}

impl Pg {
    /// Copies every thread of the home `from` (its `state=` folders and archive) into the
    /// database, with its client ids, `last` entries, suggestion ids, dependencies and ref
    /// counters, and its keys, registry and ledger (`transfer_shared`), all in one transaction.
    /// A thread the database has already is left alone. A file that is not a whole thread as
    /// mess wrote it, or a ledger the ledger's rules refuse, is reported, and then nothing is
    /// committed: an import is all or nothing.
    pub fn import(
        &self,
        from: &Store,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<ImportReport, StoreError> {
        let mut report = ImportReport::default();
        let mut errors = Vec::new();
        let files = from.files_in(&State::ALL, true, &mut errors);
        for e in errors {
            report.refused.push((PathBuf::new(), e.to_string()));
        }
        let mut conn = self.writer()?;
        let mut tx = conn.transaction().map_err(sorted)?;
        let mut facts = IndexFacts::default();
        let total = files.len();
        let mut batch: Vec<(ThreadRef, ThreadFile)> = Vec::new();
        for (i, (location, path)) in files.into_iter().enumerate() {
            progress(i, total);
            match load(&path, location) {
                Ok((thread, file)) => {
                    let messages = file.messages().unwrap_or_default();
                    facts.add(&thread, &file.envelope, &messages);
                    batch.push((thread, file));
                }
                Err(why) => report.refused.push((path, why)),
            }
            if batch.len() >= CHUNK {
                insert_batch(&mut tx, &mut batch, &mut report)?;
            }
        }
        insert_batch(&mut tx, &mut batch, &mut report)?;
        progress(total, total);
        report.index_entries = import_indexes(&mut tx, from.layout(), &facts)?;
        let (shared, problems) = import_shared(&mut tx, from)?;
        report.shared = shared;
        report
            .refused
            .extend(problems.into_iter().map(|why| (PathBuf::new(), why)));
        if report.refused.is_empty() {
            tx.commit().map_err(sorted)?;
            report.committed = true;
            self.forget_registry_seen();
        }
        // Otherwise the transaction is rolled back as it drops: nothing was written.
        Ok(report)
    }

    /// Writes every thread of the database into the home `to` (which must hold no threads
    /// yet), with the indexes and ref counters, each file durably: a home tier 0 runs on.
    pub fn export(
        &self,
        to: &Path,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<ExportReport, StoreError> {
        let target = Store::open(to);
        let mut errors = Vec::new();
        if !target.files_in(&State::ALL, true, &mut errors).is_empty() {
            return Err(StoreError::Other {
                message: format!(
                    "{} already holds threads; export into a new or empty folder",
                    to.display()
                ),
            });
        }
        target.init()?;
        let layout = target.layout();
        let refs = self.all_refs()?;
        let mut report = ExportReport::default();
        let total = refs.len();
        for chunk in refs.chunks(CHUNK) {
            progress(report.threads, total);
            for (thread, stored) in self.read_many(chunk)? {
                let path = layout.thread_path(&stored.location, &thread);
                fsio::ensure_dir(&layout.dir(&stored.location))?;
                fsio::write_atomic(&path, stored.text.as_bytes())?;
                report.threads += 1;
            }
        }
        progress(total, total);
        let mut conn = self.conn()?;
        for row in conn
            .query(
                "SELECT sender, key, ref FROM mess_index ORDER BY sender, key",
                &[],
            )
            .map_err(sorted)?
        {
            if let Ok(thread) = ThreadRef::parse(row.get::<_, &str>(2)) {
                index::put_named(layout, row.get(0), row.get(1), &thread)?;
                report.index_entries += 1;
            }
        }
        for row in conn
            .query(
                "SELECT dependency, dependent FROM mess_dependents ORDER BY dependency, dependent",
                &[],
            )
            .map_err(sorted)?
        {
            if let (Ok(dep), Ok(dependent)) = (
                ThreadRef::parse(row.get::<_, &str>(0)),
                ThreadRef::parse(row.get::<_, &str>(1)),
            ) {
                index::add_dependent(layout, &dep, &dependent)?;
            }
        }
        for row in conn
            .query(
                "SELECT day::text, last FROM mess_ref_days ORDER BY day",
                &[],
            )
            .map_err(sorted)?
        {
            let last: i64 = row.get(1);
            let Ok(day) = chrono::NaiveDate::parse_from_str(row.get::<_, &str>(0), "%Y-%m-%d")
            else {
                continue;
            };
            refs::ensure_at_least(layout, day, u64::try_from(last).unwrap_or(0))?;
        }
        report.shared = self.export_shared(&target)?;
        Ok(report)
    }
}

/// Inserts `batch` in the import's transaction `tx`, each thread in a savepoint of its own
/// (one the database has already is counted and left as it is).
fn insert_batch(
    tx: &mut Tx<'_>,
    batch: &mut Vec<(ThreadRef, ThreadFile)>,
    report: &mut ImportReport,
) -> Result<(), StoreError> {
    for (thread, file) in batch.drain(..) {
        let mut sub = tx.transaction().map_err(sorted)?;
        match insert(
            &mut sub,
            &thread,
            &file.envelope,
            &file.location,
            file.text(),
        ) {
            Ok(()) => {
                sub.commit().map_err(sorted)?;
                report.imported += 1;
            }
            Err(StoreError::Exists { .. }) => report.present += 1,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes an import's index entries, dependencies and ref counters in its transaction `tx`:
/// what the thread files say, then the home's own index files over it (they also hold what no
/// file says, such as the last work offered to each executor).
fn import_indexes(
    tx: &mut Tx<'_>,
    layout: &Layout,
    facts: &IndexFacts,
) -> Result<usize, StoreError> {
    let mut entries: BTreeMap<(String, String), ThreadRef> = BTreeMap::new();
    for ((sender, id), (_, thread)) in &facts.client_ids {
        entries.insert(
            (sender.clone(), entry_name(Key::ClientId(id))),
            thread.clone(),
        );
    }
    for (sender, (_, thread)) in &facts.last {
        entries.insert((sender.clone(), entry_name(Key::Last)), thread.clone());
    }
    for (sender, id, thread) in &facts.suggestions {
        entries.insert(
            (sender.clone(), entry_name(Key::Suggestion(id))),
            thread.clone(),
        );
    }
    for (sender, key, thread) in index::all_entries(layout)? {
        entries.insert((sender, key), thread);
    }
    for ((sender, key), thread) in &entries {
        tx.execute(
            "INSERT INTO mess_index (sender, key, ref) VALUES ($1, $2, $3) \
             ON CONFLICT (sender, key) DO UPDATE SET ref = EXCLUDED.ref",
            &[sender, key, &thread.as_str()],
        )
        .map_err(sorted)?;
    }
    for (dependency, dependent) in &facts.deps {
        tx.execute(
            "INSERT INTO mess_dependents (dependency, dependent) VALUES ($1, $2) \
             ON CONFLICT DO NOTHING",
            &[dependency, &dependent.as_str()],
        )
        .map_err(sorted)?;
    }
    let mut serials = facts.serials.clone();
    for (date, last) in refs::counters(layout)? {
        let e = serials.entry(date).or_insert(0);
        *e = (*e).max(last);
    }
    for (date, serial) in &serials {
        let serial = i64::try_from(*serial).unwrap_or(i64::MAX);
        tx.execute(
            "INSERT INTO mess_ref_days (day, last) VALUES ($1::text::date, $2) \
             ON CONFLICT (day) DO UPDATE SET last = GREATEST(mess_ref_days.last, EXCLUDED.last)",
            &[&date.format("%Y-%m-%d").to_string(), &serial],
        )
        .map_err(sorted)?;
    }
    Ok(entries.len())
}

/// Reads one thread file for import: it must be whole and not changed by hand since mess
/// wrote it (files of other writers are fine), with the documents after the envelope in the form mess appends to (so later changes only append).
fn load(path: &Path, location: Location) -> Result<(ThreadRef, ThreadFile), String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let thread = layout::ref_of_file(&name).ok_or("not a thread file name")?;
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let file = ThreadFile::parse(path, location, text).map_err(|e| e.to_string())?;
    if file.envelope.thread_ref != thread {
        return Err(format!(
            "the envelope says ref {}, the file name {thread}",
            file.envelope.thread_ref
        ));
    }
    file.check_tail().map_err(|e| e.to_string())?;
    if file.freshness() == Freshness::Stale {
        return Err(
            "the messages changed since mess wrote the envelope (a hand edit); run `mess fsck \
             --repair` on the home first"
                .to_owned(),
        );
    }
    let (_, docs) = crate::store::thread::pieces(file.text());
    if docs.first().is_some_and(|d| !d.starts_with("---")) || !file.text().ends_with('\n') {
        return Err(
            "the file is not in the form mess writes; run `mess fsck --repair` on the \
                    home first"
                .to_owned(),
        );
    }
    Ok((thread, file))
}
