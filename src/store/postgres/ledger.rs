//! The shells ledger in the database (tier 1): every node records movements in `mess_ledger`
//! under one advisory lock, so the balance checks of concurrent nodes never interleave, and
//! each node's mirror holds the same `ledger/YYYY-MM.yaml` files tier 0 writes.

use crate::store::error::StoreError;
use crate::store::ledger::{Balances, Check, Movement, Refused, admit};
use crate::store::postgres::{Pg, Run as _, lock_key, sorted};

impl Pg {
    /// Every movement's month and YAML document, in the order recorded.
    pub(crate) fn ledger_docs(&self) -> Result<Vec<(String, String)>, StoreError> {
        let mut conn = self.conn()?;
        let rows = conn
            .query("SELECT month, doc FROM mess_ledger ORDER BY seq", &[])
            .map_err(sorted)?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// Every account's balance, summed by the database.
    pub(crate) fn ledger_balances(&self) -> Result<Balances, StoreError> {
        let mut conn = self.conn()?;
        balances(&mut *conn)
    }

    /// Records `movement` (as `doc`, in `month`) unless its id is recorded already (then
    /// `false`), after `check` passes on the balances before it, in one transaction under the
    /// ledger's advisory lock.
    pub(crate) fn record_movement(
        &self,
        movement: &Movement,
        month: &str,
        doc: &str,
        check: Check<'_>,
    ) -> Result<bool, Refused> {
        let mut conn = self.conn()?;
        let mut tx = conn.transaction().map_err(sorted)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&lock_key("ledger")])
            .map_err(sorted)?;
        let known = tx
            .query("SELECT 1 FROM mess_ledger WHERE id = $1", &[&movement.id])
            .map_err(sorted)?;
        if !known.is_empty() {
            return Ok(false);
        }
        admit(movement, &balances(&mut tx)?, check)?;
        tx.execute(
            "INSERT INTO mess_ledger (id, month, from_acct, to_acct, shells, doc) \
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &movement.id,
                &month,
                &movement.from,
                &movement.to,
                &movement.shells,
                &doc,
            ],
        )
        .map_err(sorted)?;
        tx.commit().map_err(sorted)?;
        Ok(true)
    }
}

fn balances(conn: &mut impl crate::store::postgres::Run) -> Result<Balances, StoreError> {
    let rows = conn
        .query(
            "SELECT account, sum(delta)::bigint FROM ( \
               SELECT to_acct AS account, shells AS delta FROM mess_ledger \
               UNION ALL SELECT from_acct, -shells FROM mess_ledger) m \
             GROUP BY account",
            &[],
        )
        .map_err(sorted)?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}
