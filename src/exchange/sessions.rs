//! The state of `/mcp` sessions kept where every node can read it (on PostgreSQL), so a client
//! reconnecting to another node goes on with its session; on files nothing is kept.

use crate::exchange::{Error, Exchange};

/// The stored state of `/mcp` sessions, shared by the nodes of one database.
#[derive(Clone, Copy)]
pub struct McpSessions<'a> {
    pub(super) ex: &'a Exchange,
}

impl Exchange {
    /// The stored state of `/mcp` sessions.
    pub fn mcp_sessions(&self) -> McpSessions<'_> {
        McpSessions { ex: self }
    }
}

impl McpSessions<'_> {
    /// Whether `/mcp` sessions are kept where every node finds them (tier 1): then a request
    /// with a session id another node opened continues that session here.
    pub fn shared(&self) -> bool {
        self.ex.store.is_shared_by_nodes()
    }

    /// The stored state of `principal`'s `/mcp` session `id` (tier 1; `None` on files).
    pub fn load(&self, principal: &str, id: &str) -> Result<Option<String>, Error> {
        Ok(self.ex.store.mcp_session(principal, id)?)
    }

    /// Stores the state of `principal`'s `/mcp` session `id` (tier 1; nothing on files).
    pub fn save(&self, principal: &str, id: &str, state: &str) -> Result<(), Error> {
        Ok(self.ex.store.save_mcp_session(principal, id, state)?)
    }

    /// Forgets `principal`'s `/mcp` session `id` (tier 1; nothing on files).
    pub fn forget(&self, principal: &str, id: &str) -> Result<(), Error> {
        Ok(self.ex.store.drop_mcp_session(principal, id)?)
    }
}
