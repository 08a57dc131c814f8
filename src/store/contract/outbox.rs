//! The outbox, as the store offers it: queue, lease, shelve and prune deliveries on either
//! backend.

use crate::store::error::StoreError;
use crate::store::outbox::{Delivery, Shelf, usable_id};
use crate::store::{Backend, Store};

impl Store {
    /// Queues `delivery` unless a delivery with its id is already on any shelf; returns
    /// whether it was queued.
    pub fn enqueue(&self, delivery: &Delivery) -> Result<bool, StoreError> {
        if !usable_id(&delivery.id) {
            return Err(StoreError::Other {
                message: format!("unusable delivery id {:?}", delivery.id),
            });
        }
        match &self.backend {
            Backend::Files => self.files().enqueue(delivery),
            Backend::Postgres(db) => {
                let queued = db.enqueue(delivery)?;
                if queued {
                    self.committed();
                }
                Ok(queued)
            }
        }
    }

    /// The deliveries to send: the queue, less any a crash left behind after it was already
    /// written to a later shelf (a move writes the new shelf before it removes the old).
    ///
    /// In tier 1 every node sends: this leases the due deliveries to this node for
    /// [`LEASE`](crate::store::postgres::outbox::LEASE) (a node that dies leaves them to the others
    /// when the lease runs out) and returns those.
    pub fn queued(&self) -> (Vec<Delivery>, Vec<StoreError>) {
        match &self.backend {
            Backend::Files => self.files().queued(),
            Backend::Postgres(db) => match db.lease_due() {
                Ok(leased) => leased,
                Err(e) => (Vec::new(), vec![e]),
            },
        }
    }

    /// Whether `shelf` holds any delivery file (read from the folder only, so a check on every
    /// answer costs one directory listing).
    pub fn has_deliveries(&self, shelf: Shelf) -> bool {
        match &self.backend {
            Backend::Files => self.files().has_deliveries(shelf),
            Backend::Postgres(db) => db.has_deliveries(shelf).unwrap_or(false),
        }
    }

    /// The deliveries on `shelf`, in id order, with the files that could not be read.
    pub fn deliveries(&self, shelf: Shelf) -> (Vec<Delivery>, Vec<StoreError>) {
        self.deliveries_of(shelf, None)
    }

    /// The deliveries on `shelf` of the threads in `threads` (or of all), in id order, with
    /// the files that could not be read. A delivery's id starts with its thread's ref, so
    /// the others are passed over by name (or by index), unread.
    pub fn deliveries_of(
        &self,
        shelf: Shelf,
        threads: Option<&std::collections::HashSet<String>>,
    ) -> (Vec<Delivery>, Vec<StoreError>) {
        match &self.backend {
            Backend::Files => self.files().deliveries_of(shelf, threads),
            Backend::Postgres(db) => match db.deliveries(shelf, threads) {
                Ok(found) => found,
                Err(e) => (Vec::new(), vec![e]),
            },
        }
    }

    /// Removes records of finished deliveries (`done/`) last written more than `older_than`
    /// ago; returns how many. Failed ones stay for people to look at.
    pub fn prune_done(&self, older_than: std::time::Duration) -> usize {
        match &self.backend {
            Backend::Files => self.files().prune_done(older_than),
            Backend::Postgres(db) => db.prune_done(older_than).unwrap_or(0),
        }
    }

    /// Rewrites a queued delivery (after a failed attempt, with its next due time).
    pub fn requeue(&self, delivery: &Delivery) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Files => self.files().requeue(delivery),
            Backend::Postgres(db) => db.requeue(delivery),
        }
    }

    /// Moves `delivery` from shelf `from` to shelf `to`, as it is now: written to its new
    /// shelf first, then removed from the old one.
    pub fn shelve(&self, delivery: &Delivery, from: Shelf, to: Shelf) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Files => self.files().shelve(delivery, from, to),
            Backend::Postgres(db) => db.shelve(delivery, from, to),
        }
    }
}
