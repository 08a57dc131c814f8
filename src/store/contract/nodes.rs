//! What several nodes share on the postgres backend, as the store offers it: the change feed
//! a node follows into its mirror ([`Following`]), MCP sessions any node continues, the health
//! of the shared database. On files there is one node: no feed to follow (other processes' writes
//! are seen in the files themselves), sessions live in the process, and the store is always
//! healthy.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::protocol::envelope::Envelope;
use crate::protocol::ids::ThreadRef;
use crate::store::error::StoreError;
use crate::store::layout::Layout;
use crate::store::postgres::{Pg, mirror};
use crate::store::{Backend, Store};

/// A node following the shared database's change feed into its mirror (postgres backend).
pub struct Following {
    pg: Pg,
    layout: Layout,
    follower: mirror::Follower,
}

/// How often a follower looks at the feed at the least, and the shortest time between two
/// passes while changes keep coming.
pub const FOLLOW_PASS_EVERY: Duration = mirror::PASS_EVERY;

impl Following {
    /// Listens for other nodes' commits on a connection of its own and wakes this follower on
    /// each, until `stop` is set (blocking: run it on a thread of its own).
    pub fn listen(&self, stop: Arc<AtomicBool>) {
        self.pg.listen(stop);
    }

    /// A handle that listens (see [`Following::listen`]) from another thread.
    pub fn listener(&self) -> impl FnOnce(Arc<AtomicBool>) + Send + 'static {
        let pg = self.pg.clone();
        move |stop| pg.listen(stop)
    }

    /// Reads every change committed since the last pass: each thread as it now is, with the
    /// `/events` cursor of its change (a resume from it misses nothing).
    pub fn pass(&mut self) -> Result<Vec<(Envelope, String)>, StoreError> {
        Ok(self
            .follower
            .pass(&self.pg, &self.layout)?
            .into_iter()
            .map(|a| (a.envelope, format!("{}-{}", a.horizon, a.id)))
            .collect())
    }

    /// Whether the last pass stopped at a full batch, with more to read at once.
    pub fn behind(&self) -> bool {
        self.follower.behind()
    }

    /// How long until threads read but not yet written are due in the mirror.
    pub fn write_due(&self) -> Option<Duration> {
        self.follower.write_due()
    }

    /// Writes the threads read since the last write into the mirror.
    pub fn write(&mut self) -> Result<(), StoreError> {
        self.follower.write(&self.layout)
    }

    /// Waits until a commit is reported (here or by another node) or `timeout` passes.
    pub fn wait(&self, timeout: Duration) {
        self.pg.wait_for_change(timeout);
    }
}

impl Store {
    /// Whether several nodes share this store (the postgres backend): then deliveries are
    /// leased row by row to whichever node sends them, key records change under other nodes,
    /// and MCP sessions are kept where every node finds them.
    pub fn is_shared_by_nodes(&self) -> bool {
        matches!(self.backend, Backend::Postgres(_))
    }

    /// Starts following the change feed into this node's mirror (the mirror is brought up to
    /// date first); `None` on files, which have no feed.
    pub fn following(&self) -> Result<Option<Following>, StoreError> {
        match &self.backend {
            Backend::Files => Ok(None),
            Backend::Postgres(pg) => Ok(Some(Following {
                pg: pg.as_ref().clone(),
                layout: self.layout().clone(),
                follower: mirror::Follower::start(pg, self.layout())?,
            })),
        }
    }

    /// The threads changed after the feed position `horizon` (an `/events` cursor's first
    /// part), with each change's id, at most `limit`; `None` when the feed no longer reaches
    /// back that far. On files, nothing: there is no feed to resume.
    pub fn changed_since(
        &self,
        horizon: u64,
        limit: usize,
    ) -> Result<Option<Vec<(ThreadRef, i64)>>, StoreError> {
        match &self.backend {
            Backend::Files => Ok(Some(Vec::new())),
            Backend::Postgres(pg) => pg.changed_since(horizon, limit),
        }
    }

    /// Deletes the change feed's entries older than it keeps; how many went (none on files).
    pub fn prune_changes(&self) -> Result<i64, StoreError> {
        match &self.backend {
            Backend::Files => Ok(0),
            Backend::Postgres(pg) => pg.prune_changes(),
        }
    }

    /// The stored state of `principal`'s `/mcp` session `id` (`None` on files, where sessions
    /// live in the process that opened them).
    pub fn mcp_session(&self, principal: &str, id: &str) -> Result<Option<String>, StoreError> {
        match &self.backend {
            Backend::Files => Ok(None),
            Backend::Postgres(pg) => pg.mcp_session(principal, id),
        }
    }

    /// Stores the state of `principal`'s `/mcp` session `id` (nothing on files).
    pub fn save_mcp_session(
        &self,
        principal: &str,
        id: &str,
        state: &str,
    ) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Files => Ok(()),
            Backend::Postgres(pg) => pg.save_mcp_session(principal, id, state),
        }
    }

    /// Forgets `principal`'s `/mcp` session `id` (nothing on files).
    pub fn drop_mcp_session(&self, principal: &str, id: &str) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Files => Ok(()),
            Backend::Postgres(pg) => pg.drop_mcp_session(principal, id),
        }
    }

    /// Whether the store can serve now: files always; the shared database when it answers.
    pub fn ping(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Files => Ok(()),
            Backend::Postgres(pg) => pg.ping(),
        }
    }
}
