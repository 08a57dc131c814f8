//! Deliveries and short links in the database (tier 1). Every node sends: a node leases the
//! due deliveries it will send (`FOR UPDATE SKIP LOCKED`, so two nodes never lease one), and
//! finishes each fenced by its lease (an update that names the node), so a node whose lease
//! ran out and was taken over cannot overwrite the new holder's record.

use std::time::Duration;

use crate::protocol::emit;
use crate::protocol::time;
use crate::protocol::yaml::{self, Limits};
use crate::store::error::StoreError;
use crate::store::outbox::{Delivery, Shelf};
use crate::store::postgres::{Pg, Run as _, sorted};

/// How long a node holds the deliveries it leased: longer than any send takes (channels time
/// out well within it), short enough that a dead node's work moves on soon.
pub const LEASE: Duration = Duration::from_secs(30);

/// Deliveries one node leases at once.
const LEASE_BATCH: i64 = 64;

fn text_of(delivery: &Delivery) -> String {
    emit::to_yaml(&delivery.to_value())
}

fn delivery_of(id: &str, doc: &str) -> Result<Delivery, StoreError> {
    yaml::parse_document(doc, &Limits::DEFAULT)
        .ok()
        .as_ref()
        .and_then(Delivery::from_value)
        .ok_or_else(|| StoreError::Other {
            message: format!("database: delivery {id} is not a delivery record"),
        })
}

/// Queues `delivery` in `tx` unless one with its id exists on any shelf; returns whether it
/// did.
pub(crate) fn enqueue_in(
    tx: &mut impl crate::store::postgres::Run,
    delivery: &Delivery,
) -> Result<bool, StoreError> {
    let n = tx
        .execute(
            "INSERT INTO mess_outbox (id, shelf, doc, due) \
             VALUES ($1, 'queue', $2, $3::text::timestamptz) ON CONFLICT (id) DO NOTHING",
            &[
                &delivery.id,
                &text_of(delivery),
                &time::format_timestamp(&delivery.due),
            ],
        )
        .map_err(sorted)?;
    Ok(n == 1)
}

/// The id, record and due time of each of `deliveries`, as columns (for one statement that
/// queues them all).
pub(crate) fn columns(deliveries: &[Delivery]) -> (Vec<String>, Vec<String>, Vec<String>) {
    (
        deliveries.iter().map(|d| d.id.clone()).collect(),
        deliveries.iter().map(text_of).collect(),
        deliveries
            .iter()
            .map(|d| time::format_timestamp(&d.due))
            .collect(),
    )
}

impl Pg {
    /// Queues `delivery` unless one with its id exists on any shelf; returns whether it did.
    pub(crate) fn enqueue(&self, delivery: &Delivery) -> Result<bool, StoreError> {
        let mut conn = self.conn()?;
        enqueue_in(&mut *conn, delivery)
    }

    /// Leases the due deliveries nobody holds (or whose holder's lease ran out) to this node.
    pub(crate) fn lease_due(&self) -> Result<(Vec<Delivery>, Vec<StoreError>), StoreError> {
        let mut conn = self.conn()?;
        let seconds = i64::try_from(LEASE.as_secs()).unwrap_or(30);
        let rows = conn
            .query(
                "UPDATE mess_outbox SET locked_by = $1, \
                 locked_until = now() + make_interval(secs => $2) \
                 WHERE id IN (SELECT id FROM mess_outbox WHERE shelf = 'queue' AND due <= now() \
                   AND (locked_until IS NULL OR locked_until < now()) \
                   ORDER BY due LIMIT $3 FOR UPDATE SKIP LOCKED) \
                 RETURNING id, doc",
                &[&self.node, &(seconds as f64), &LEASE_BATCH],
            )
            .map_err(sorted)?;
        let mut out = Vec::with_capacity(rows.len());
        let mut errors = Vec::new();
        for row in &rows {
            match delivery_of(row.get(0), row.get(1)) {
                Ok(d) => out.push(d),
                Err(e) => errors.push(e),
            }
        }
        out.sort_by(|a, b| a.due.cmp(&b.due).then(a.id.cmp(&b.id)));
        Ok((out, errors))
    }

    /// Whether `shelf` holds any delivery.
    pub(crate) fn has_deliveries(&self, shelf: Shelf) -> Result<bool, StoreError> {
        let mut conn = self.conn()?;
        Ok(conn
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM mess_outbox WHERE shelf = $1)",
                &[&shelf.dir_name()],
            )
            .map_err(sorted)?
            .get(0))
    }

    /// The deliveries on `shelf` (of the threads in `threads`, or all), in id order.
    pub(crate) fn deliveries(
        &self,
        shelf: Shelf,
        threads: Option<&std::collections::HashSet<String>>,
    ) -> Result<(Vec<Delivery>, Vec<StoreError>), StoreError> {
        let mut conn = self.conn()?;
        let rows = match threads {
            None => conn.query(
                "SELECT id, doc FROM mess_outbox WHERE shelf = $1 ORDER BY id",
                &[&shelf.dir_name()],
            ),
            Some(threads) => {
                let threads: Vec<&str> = threads.iter().map(String::as_str).collect();
                conn.query(
                    "SELECT id, doc FROM mess_outbox \
                     WHERE shelf = $1 AND split_part(id, '.', 1) = ANY($2) ORDER BY id",
                    &[&shelf.dir_name(), &threads],
                )
            }
        }
        .map_err(sorted)?;
        let mut out = Vec::new();
        let mut errors = Vec::new();
        for row in &rows {
            let id: &str = row.get(0);
            match delivery_of(id, row.get(1)) {
                Ok(d) => out.push(d),
                Err(e) => errors.push(e),
            }
        }
        Ok((out, errors))
    }

    /// Rewrites a queued delivery with its next due time and gives up this node's lease.
    pub(crate) fn requeue(&self, delivery: &Delivery) -> Result<(), StoreError> {
        let mut conn = self.conn()?;
        conn.execute(
            "UPDATE mess_outbox SET doc = $2, due = $3::text::timestamptz, written = now(), \
             locked_by = NULL, locked_until = NULL \
             WHERE id = $1 AND shelf = 'queue' AND (locked_by IS NULL OR locked_by = $4)",
            &[
                &delivery.id,
                &text_of(delivery),
                &time::format_timestamp(&delivery.due),
                &self.node,
            ],
        )
        .map_err(sorted)?;
        Ok(())
    }

    /// Moves `delivery` from `from` to `to` as it is now; from the queue only under this
    /// node's lease (or none).
    pub(crate) fn shelve(
        &self,
        delivery: &Delivery,
        from: Shelf,
        to: Shelf,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn()?;
        conn.execute(
            "UPDATE mess_outbox SET shelf = $3, doc = $4, written = now(), \
             locked_by = NULL, locked_until = NULL \
             WHERE id = $1 AND shelf = $2 AND ($2 <> 'queue' OR locked_by IS NULL OR locked_by = $5)",
            &[
                &delivery.id,
                &from.dir_name(),
                &to.dir_name(),
                &text_of(delivery),
                &self.node,
            ],
        )
        .map_err(sorted)?;
        Ok(())
    }

    /// Removes finished deliveries last written more than `older_than` ago.
    pub(crate) fn prune_done(&self, older_than: Duration) -> Result<usize, StoreError> {
        let mut conn = self.conn()?;
        let n = conn
            .execute(
                "DELETE FROM mess_outbox WHERE shelf = 'done' \
                 AND written < now() - make_interval(secs => $1)",
                &[&older_than.as_secs_f64()],
            )
            .map_err(sorted)?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// Stores a short link's code.
    pub(crate) fn save_short_link(
        &self,
        code: &str,
        token: &str,
        exp: i64,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn()?;
        conn.execute(
            "INSERT INTO mess_short_links (code, token, exp) VALUES ($1, $2, $3)",
            &[&code, &token, &exp],
        )
        .map_err(sorted)?;
        Ok(())
    }

    /// The token of a live code.
    pub(crate) fn short_link(&self, code: &str, now: i64) -> Result<Option<String>, StoreError> {
        let mut conn = self.conn()?;
        Ok(conn
            .query_opt(
                "SELECT token FROM mess_short_links WHERE code = $1 AND exp > $2",
                &[&code, &now],
            )
            .map_err(sorted)?
            .map(|r| r.get(0)))
    }

    /// Removes expired codes.
    pub(crate) fn prune_short_links(&self, now: i64) -> Result<usize, StoreError> {
        let mut conn = self.conn()?;
        let n = conn
            .execute("DELETE FROM mess_short_links WHERE exp <= $1", &[&now])
            .map_err(sorted)?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }
}
