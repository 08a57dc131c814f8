//! What else a home holds that moves between the tiers with its threads (`mess import`,
//! `mess export`): the API key records (hashes only), the registrations and routing rules that
//! `config` messages set, and the shells ledger. Without them a moved home's keys would stop
//! working, its self-registered executors would vanish, and its escrows would hold nothing.

use std::collections::BTreeMap;
use std::path::Path;

use crate::protocol::emit;
use crate::protocol::yaml::{self, Limits};
use crate::store::error::StoreError;
use crate::store::ledger::{Movement, replay};
use crate::store::postgres::session::Tx;
use crate::store::postgres::shared::insert_key_record;
use crate::store::postgres::{Pg, Run as _, lock_key, sorted};
use crate::store::{Store, fsio};

/// How much of the shared state crossed.
#[derive(Debug, Default, Clone, Copy)]
pub struct SharedReport {
    /// Key records copied (those already there are kept as they are).
    pub keys: usize,
    /// Registrations and routing rules copied.
    pub registry: usize,
    /// Ledger movements copied (those already there by id are kept as they are).
    pub movements: usize,
}

/// Copies the key records, registry and ledger of the home `from` into the database in the
/// import's transaction `tx`; returns what it copied and what it refused (a file that does not
/// parse, a ledger the ledger's rules refuse: see [`replay`]). The caller commits only when
/// nothing was refused. Key records and registrations are checked by the exchange before (as
/// `mess token` and a `config` message check them); here they are only written.
pub(crate) fn import_shared(
    tx: &mut Tx<'_>,
    from: &Store,
) -> Result<(SharedReport, Vec<String>), StoreError> {
    let mut report = SharedReport::default();
    let mut problems = Vec::new();
    for record in from.key_records()? {
        if insert_key_record(tx, &record)? {
            report.keys += 1;
        }
    }
    let (files, errors) = from.registry();
    problems.extend(errors.iter().map(ToString::to_string));
    let mut docs: Vec<(String, String)> = Vec::new();
    for (path, registration) in &files.registrations {
        let Some(stem) = path.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
            continue;
        };
        docs.push((format!("executors/{stem}"), emit::to_yaml(registration)));
    }
    if let Some(routing) = &files.routing {
        docs.push(("routing".to_owned(), emit::to_yaml(routing)));
    }
    for (name, doc) in &docs {
        tx.execute(
            "INSERT INTO mess_registry (name, doc) VALUES ($1, $2) ON CONFLICT (name) \
             DO UPDATE SET doc = EXCLUDED.doc, version = nextval('mess_registry_version')",
            &[name, doc],
        )
        .map_err(sorted)?;
        report.registry += 1;
    }
    // The ledger: replayed on what the database holds, under its lock, by the ledger's rules.
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&lock_key("ledger")])
        .map_err(sorted)?;
    let mut recorded = Vec::new();
    for row in tx
        .query("SELECT doc FROM mess_ledger ORDER BY seq", &[])
        .map_err(sorted)?
    {
        let doc: String = row.get(0);
        if let Ok(values) = yaml::parse_documents(&doc, &Limits::DEFAULT) {
            recorded.extend(values.iter().filter_map(Movement::from_value));
        }
    }
    let movements = match replay(&recorded, &from.ledger()?) {
        Ok(fresh) => fresh,
        Err(refusals) => {
            problems.extend(refusals.into_iter().map(|why| format!("ledger: {why}")));
            Vec::new()
        }
    };
    for m in &movements {
        tx.execute(
            "INSERT INTO mess_ledger (id, month, from_acct, to_acct, shells, doc) \
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &m.id,
                &m.at.format("%Y-%m").to_string(),
                &m.from,
                &m.to,
                &m.shells,
                &emit::to_yaml(&m.to_value()),
            ],
        )
        .map_err(sorted)?;
        report.movements += 1;
    }
    Ok((report, problems))
}

impl Pg {
    /// Writes the key records, registry and ledger of the database into the home `to`, each
    /// file durably.
    pub(crate) fn export_shared(&self, to: &Store) -> Result<SharedReport, StoreError> {
        let mut report = SharedReport::default();
        let layout = to.layout();
        for record in self.key_records()? {
            to.add_key_record(record)?;
            report.keys += 1;
        }
        for (name, doc) in self.registry_docs()? {
            let path = match name.strip_prefix("executors/") {
                Some(stem) => layout.registrations_dir().join(format!("{stem}.yaml")),
                None if name == "routing" => layout.routing_file(),
                None => continue,
            };
            write_durably(&path, &doc)?;
            report.registry += 1;
        }
        let mut months: BTreeMap<String, String> = BTreeMap::new();
        for (month, doc) in self.ledger_docs()? {
            // Only what reads back as a movement is written, as tier 0 would have it.
            let docs = yaml::parse_documents(&doc, &Limits::DEFAULT)
                .map_err(|e| StoreError::malformed(&to.layout().ledger_dir(), e.into()))?;
            if docs.iter().filter_map(Movement::from_value).count() == 0 {
                continue;
            }
            let text = months.entry(month).or_default();
            text.push_str("---\n");
            text.push_str(&doc);
            report.movements += 1;
        }
        for (month, text) in &months {
            write_durably(
                &to.layout().ledger_dir().join(format!("{month}.yaml")),
                text,
            )?;
        }
        Ok(report)
    }
}

fn write_durably(path: &Path, text: &str) -> Result<(), StoreError> {
    if let Some(dir) = path.parent() {
        fsio::ensure_dir(dir)?;
    }
    fsio::write_atomic(path, text.as_bytes())
}
