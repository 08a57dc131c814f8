//! The shells ledger on files: `ledger/YYYY-MM.yaml`, one document per movement, each month
//! replaced atomically under the ledger lock.

use std::path::PathBuf;

use crate::protocol::{
    emit,
    yaml::{self, Limits},
};
use crate::store::files::Files;
use crate::store::ledger::{Balances, Check, Movement, OPERATOR, Refused, admit, balances_of};
use crate::store::{error::StoreError, fsio, lock};

impl Files<'_> {
    /// `ledger/`: the shells ledger, a file per month.
    pub(crate) fn ledger_dir(&self) -> PathBuf {
        self.layout().ledger_dir()
    }

    /// Every recorded movement, in the order recorded. A document that is not a movement (a
    /// hand edit) is left out.
    pub(crate) fn ledger(&self) -> Result<Vec<Movement>, StoreError> {
        let dir = self.ledger_dir();
        let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.extension().is_some_and(|x| x == "yaml")
                        && !p
                            .file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                })
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::io(&dir, e)),
        };
        files.sort();
        let mut out = Vec::new();
        for path in files {
            let Some(text) = fsio::read_optional(&path)? else {
                continue;
            };
            let docs = yaml::parse_documents(&text, &Limits::DEFAULT)
                .map_err(|e| StoreError::malformed(&path, e.into()))?;
            out.extend(docs.iter().filter_map(Movement::from_value));
        }
        Ok(out)
    }

    /// The balance of every account that ever moved shells.
    pub(crate) fn balances(&self) -> Result<Balances, StoreError> {
        Ok(balances_of(&self.ledger()?))
    }

    /// Records `movement` unless a movement with its id is recorded already (then `false`),
    /// after `check` passes on the balances before it; under the ledger lock (in tier 1, the
    /// database's), so checks and records of concurrent writers never interleave.
    pub(crate) fn record_movement(
        &self,
        movement: &Movement,
        check: Check<'_>,
    ) -> Result<bool, Refused> {
        let layout = self.layout();
        let _lock = lock::acquire(&layout.locks_dir(), "ledger")?;
        let all = self.ledger()?;
        if all.iter().any(|m| m.id == movement.id) {
            return Ok(false);
        }
        admit(movement, &balances_of(&all), check)?;
        let dir = self.ledger_dir();
        fsio::ensure_dir(&dir)?;
        let path = dir.join(format!("{}.yaml", movement.at.format("%Y-%m")));
        let mut text = fsio::read_optional(&path)?.unwrap_or_default();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str("---\n");
        text.push_str(&emit::to_yaml(&movement.to_value()));
        fsio::write_atomic(&path, text.as_bytes())?;
        Ok(true)
    }

    /// `mess fsck` of the ledger: every file reads, every document is a movement, no id is
    /// recorded twice, the balances sum to zero and only `operator` is below zero. The ledger
    /// is append-only, so nothing here is repaired: findings are for the operator.
    pub(crate) fn check_ledger(&self, report: &mut crate::store::fsck::FsckReport) {
        let dir = self.ledger_dir();
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return;
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        paths.sort();
        let mut all = Vec::new();
        for path in paths {
            let text = match fsio::read_optional(&path) {
                Ok(t) => t.unwrap_or_default(),
                Err(e) => {
                    report.note(&path, e.to_string(), false);
                    continue;
                }
            };
            let docs = match yaml::parse_documents(&text, &Limits::DEFAULT) {
                Ok(docs) => docs,
                Err(e) => {
                    report.note(&path, format!("the ledger file does not parse: {e}"), false);
                    continue;
                }
            };
            for (i, doc) in docs.iter().enumerate().filter(|(_, d)| !d.is_null()) {
                match Movement::from_value(doc) {
                    Some(m) => all.push((path.clone(), m)),
                    None => report.note(
                        &path,
                        format!(
                            "document {} is not a movement of shells (left out of every balance)",
                            i + 1
                        ),
                        false,
                    ),
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        for (path, m) in &all {
            if !seen.insert(m.id.clone()) {
                report.note(path, format!("movement {} is recorded twice", m.id), false);
            }
        }
        let movements: Vec<Movement> = all.into_iter().map(|(_, m)| m).collect();
        let balances = balances_of(&movements);
        let sum: i64 = balances.values().sum();
        if sum != 0 {
            report.note(&dir, format!("the balances sum to {sum}, not 0"), false);
        }
        for (account, balance) in balances.iter().filter(|(a, b)| **b < 0 && *a != OPERATOR) {
            report.note(&dir, format!("{account} is below zero ({balance})"), false);
        }
    }
}
