//! The shells ledger, as the store offers it: movements recorded once by id under the
//! ledger's rules, and balances, on either backend.

use crate::protocol::emit;
use crate::protocol::yaml::{self, Limits};
use crate::store::error::StoreError;
use crate::store::ledger::{Balances, Check, Movement, Refused};
use crate::store::{Backend, Store};

impl Store {
    /// Every recorded movement, in the order recorded. A document that is not a movement (a
    /// hand edit) is left out.
    pub fn ledger(&self) -> Result<Vec<Movement>, StoreError> {
        match &self.backend {
            Backend::Files => self.files().ledger(),
            Backend::Postgres(pg) => {
                let mut out = Vec::new();
                for (_, doc) in pg.ledger_docs()? {
                    let docs = yaml::parse_documents(&doc, &Limits::DEFAULT).map_err(|e| {
                        StoreError::malformed(&self.layout().ledger_dir(), e.into())
                    })?;
                    out.extend(docs.iter().filter_map(Movement::from_value));
                }
                Ok(out)
            }
        }
    }

    /// The balance of every account that ever moved shells.
    pub fn balances(&self) -> Result<Balances, StoreError> {
        match &self.backend {
            Backend::Files => self.files().balances(),
            Backend::Postgres(pg) => pg.ledger_balances(),
        }
    }

    /// Records `movement` unless a movement with its id is recorded already (then `false`),
    /// after `check` passes on the balances before it; under the ledger lock (in tier 1, the
    /// database's), so checks and records of concurrent writers never interleave.
    pub fn record_movement(&self, movement: &Movement, check: Check<'_>) -> Result<bool, Refused> {
        match &self.backend {
            Backend::Files => self.files().record_movement(movement, check),
            Backend::Postgres(pg) => {
                let doc = emit::to_yaml(&movement.to_value());
                let month = movement.at.format("%Y-%m").to_string();
                let recorded = pg.record_movement(movement, &month, &doc, check)?;
                // This node's mirror has it at once (else its follower writes it soon); the
                // movement is committed either way, so a failed copy is no failure of it.
                if let Err(e) = crate::store::postgres::mirror::sync_ledger(pg, self.layout()) {
                    tracing::warn!(error = %e, "the ledger's mirror files lag until the follower writes them");
                }
                Ok(recorded)
            }
        }
    }
}
