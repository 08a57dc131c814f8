//! The outbox on files: one YAML file per delivery under `.mess/outbox/<shelf>/`, moved between
//! shelves by writing the new copy before removing the old, so a crash leaves each delivery on at
//! least one shelf.

use std::path::PathBuf;

use crate::protocol::emit;
use crate::store::error::StoreError;
use crate::store::files::Files;
use crate::store::fsio;
use crate::store::outbox::{Delivery, Shelf};
use crate::store::thread::parse_yaml_file;

impl Files<'_> {
    fn shelf_dir(&self, shelf: Shelf) -> PathBuf {
        self.layout()
            .internal_dir()
            .join("outbox")
            .join(shelf.dir_name())
    }

    fn delivery_path(&self, shelf: Shelf, id: &str) -> PathBuf {
        self.shelf_dir(shelf).join(format!("{id}.yaml"))
    }

    /// Queues `delivery` unless a delivery with its id is already on any shelf; returns
    /// whether it was queued.
    pub(crate) fn enqueue(&self, delivery: &Delivery) -> Result<bool, StoreError> {
        if Shelf::ALL
            .iter()
            .any(|s| self.delivery_path(*s, &delivery.id).exists())
        {
            return Ok(false);
        }
        let dir = self.shelf_dir(Shelf::Queue);
        fsio::ensure_dir(&dir)?;
        let text = emit::to_yaml(&delivery.to_value());
        match fsio::create_atomic(
            &self.delivery_path(Shelf::Queue, &delivery.id),
            text.as_bytes(),
        ) {
            Ok(()) => Ok(true),
            Err(StoreError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::AlreadyExists =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// The deliveries to send: the queue, less any a crash left behind after it was already
    /// written to a later shelf (a move writes the new shelf before it removes the old).
    ///
    /// In tier 1 every node sends: this leases the due deliveries to this node for
    /// [`LEASE`](crate::store::postgres::outbox::LEASE) (a node that dies leaves them to the others
    /// when the lease runs out) and returns those.
    pub(crate) fn queued(&self) -> (Vec<Delivery>, Vec<StoreError>) {
        let (mut queued, errors) = self.deliveries_of(Shelf::Queue, None);
        queued.retain(|d| {
            let moved = [Shelf::Sent, Shelf::Done, Shelf::Failed]
                .iter()
                .any(|s| self.delivery_path(*s, &d.id).exists());
            if moved {
                let _ = fsio::remove_durable(&self.delivery_path(Shelf::Queue, &d.id));
            }
            !moved
        });
        (queued, errors)
    }

    /// Whether `shelf` holds any delivery file (read from the folder only, so a check on every
    /// answer costs one directory listing).
    pub(crate) fn has_deliveries(&self, shelf: Shelf) -> bool {
        std::fs::read_dir(self.shelf_dir(shelf)).is_ok_and(|entries| {
            entries.filter_map(Result::ok).any(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.ends_with(".yaml") && !name.contains(fsio::TEMP_MARK)
            })
        })
    }

    /// The deliveries on `shelf` of the threads in `threads` (or of all), in id order, with
    /// the files that could not be read. A delivery's id starts with its thread's ref, so
    /// the others are passed over by name (or by index), unread.
    pub(crate) fn deliveries_of(
        &self,
        shelf: Shelf,
        threads: Option<&std::collections::HashSet<String>>,
    ) -> (Vec<Delivery>, Vec<StoreError>) {
        // A ref holds no dot.
        let wanted =
            |id: &str| threads.is_none_or(|t| id.split('.').next().is_some_and(|r| t.contains(r)));
        let dir = self.shelf_dir(shelf);
        let mut out = Vec::new();
        let mut errors = Vec::new();
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return (out, errors);
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.extension().is_some_and(|x| x == "yaml")
                    && !p.to_string_lossy().contains(fsio::TEMP_MARK)
                    && p.file_stem()
                        .is_some_and(|id| wanted(&id.to_string_lossy()))
            })
            .collect();
        paths.sort();
        for path in paths {
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                // Moved to another shelf meanwhile.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    errors.push(StoreError::io(&path, e));
                    continue;
                }
            };
            match parse_yaml_file(&path, &text).map(|v| Delivery::from_value(&v)) {
                Ok(Some(d)) => out.push(d),
                Ok(None) => errors.push(StoreError::Other {
                    message: format!("{}: not a delivery record", path.display()),
                }),
                Err(e) => errors.push(e),
            }
        }
        (out, errors)
    }

    /// Removes records of finished deliveries (`done/`) last written more than `older_than`
    /// ago; returns how many. Failed ones stay for people to look at.
    pub(crate) fn prune_done(&self, older_than: std::time::Duration) -> usize {
        let dir = self.shelf_dir(Shelf::Done);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return 0;
        };
        let mut removed = 0;
        for entry in entries.filter_map(Result::ok) {
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > older_than);
            if old && std::fs::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        }
        if removed > 0 {
            let _ = fsio::sync_dir(&dir);
        }
        removed
    }

    /// Rewrites a queued delivery (after a failed attempt, with its next due time).
    pub(crate) fn requeue(&self, delivery: &Delivery) -> Result<(), StoreError> {
        let text = emit::to_yaml(&delivery.to_value());
        fsio::write_atomic(
            &self.delivery_path(Shelf::Queue, &delivery.id),
            text.as_bytes(),
        )
    }

    /// Moves `delivery` from shelf `from` to shelf `to`, as it is now: written to its new
    /// shelf first, then removed from the old one.
    pub(crate) fn shelve(
        &self,
        delivery: &Delivery,
        from: Shelf,
        to: Shelf,
    ) -> Result<(), StoreError> {
        fsio::ensure_dir(&self.shelf_dir(to))?;
        let text = emit::to_yaml(&delivery.to_value());
        fsio::write_atomic(&self.delivery_path(to, &delivery.id), text.as_bytes())?;
        fsio::remove_durable(&self.delivery_path(from, &delivery.id))
    }
}
