//! What every node must agree on besides threads, kept in the database in tier 1: API key
//! records (hashes only), the generated secrets and exchange id, and the executor
//! registrations and routing rules that `config` messages set, and the `/mcp` sessions (so a
//! session continues on whichever node a request lands).

use crate::store::error::StoreError;
use crate::store::keys::KeyRecord;
use crate::store::postgres::{Pg, Run, locked, sorted};

/// How long a node uses the registry's version without asking again.
const REGISTRY_FRESH: std::time::Duration = std::time::Duration::from_millis(250);

/// Stored `/mcp` sessions kept per principal: twice the sessions one principal may hold open.
pub(crate) const SESSIONS_KEPT: i64 = 64;

impl Pg {
    /// Every key record, oldest first.
    pub(crate) fn key_records(&self) -> Result<Vec<KeyRecord>, StoreError> {
        let mut conn = self.conn()?;
        let rows = conn
            .query(
                "SELECT hash, principal, role, created, callback FROM mess_keys ORDER BY seq",
                &[],
            )
            .map_err(sorted)?;
        Ok(rows
            .iter()
            .map(|r| KeyRecord {
                hash: r.get(0),
                principal: r.get(1),
                role: r.get(2),
                created: r.get(3),
                callback: r.get(4),
            })
            .collect())
    }

    /// What identifies the key records as they are now: their number and the newest's place.
    pub(crate) fn keys_version(&self) -> Result<(i64, i64), StoreError> {
        let mut conn = self.conn()?;
        let row = conn
            .query_one("SELECT count(*), coalesce(max(seq), 0) FROM mess_keys", &[])
            .map_err(sorted)?;
        Ok((row.get(0), row.get(1)))
    }

    /// Adds a key record.
    pub(crate) fn add_key_record(&self, record: &KeyRecord) -> Result<(), StoreError> {
        insert_key_record(&mut *self.conn()?, record).map(|_| ())
    }

    /// The secret `name`, made from `fresh` on first use; nodes that race agree on the first.
    pub(crate) fn secret(&self, name: &str, fresh: &str) -> Result<String, StoreError> {
        let mut conn = self.conn()?;
        conn.execute(
            "INSERT INTO mess_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
            &[&name, &fresh],
        )
        .map_err(sorted)?;
        Ok(conn
            .query_one("SELECT value FROM mess_secrets WHERE name = $1", &[&name])
            .map_err(sorted)?
            .get(0))
    }

    /// Every registry document (`executors/<stem>` and `routing`), by name.
    pub(crate) fn registry_docs(&self) -> Result<Vec<(String, String)>, StoreError> {
        let mut conn = self.conn()?;
        let rows = conn
            .query("SELECT name, doc FROM mess_registry ORDER BY name", &[])
            .map_err(sorted)?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// What identifies the registry as it is now: its number of documents and the newest
    /// change.
    pub(crate) fn registry_version(&self) -> Result<(i64, i64), StoreError> {
        let mut conn = self.conn()?;
        let row = conn
            .query_one(
                "SELECT count(*), coalesce(max(version), 0) FROM mess_registry",
                &[],
            )
            .map_err(sorted)?;
        Ok((row.get(0), row.get(1)))
    }

    /// The registry's version as read at most [`REGISTRY_FRESH`] ago: the directory asks on
    /// every use, and a round trip each time cost more than the rest of a request. A change
    /// made through this node is seen at once; one made through another node within that time.
    pub(crate) fn registry_version_recent(&self) -> Result<(i64, i64), StoreError> {
        if let Some((at, version)) = *locked(&self.registry_seen)
            && at.elapsed() < REGISTRY_FRESH
        {
            return Ok(version);
        }
        let version = self.registry_version()?;
        *locked(&self.registry_seen) = Some((std::time::Instant::now(), version));
        Ok(version)
    }

    /// Forgets the registry version last read, so the next read of the directory asks the
    /// database (after an import wrote registrations in its own transaction).
    pub(crate) fn forget_registry_seen(&self) {
        *locked(&self.registry_seen) = None;
    }

    /// Stores (or replaces) the registry document `name`.
    pub(crate) fn put_registry_doc(&self, name: &str, doc: &str) -> Result<(), StoreError> {
        let mut conn = self.conn()?;
        conn.execute(
            "INSERT INTO mess_registry (name, doc) VALUES ($1, $2) ON CONFLICT (name) \
             DO UPDATE SET doc = EXCLUDED.doc, version = nextval('mess_registry_version')",
            &[&name, &doc],
        )
        .map_err(sorted)?;
        *locked(&self.registry_seen) = None;
        Ok(())
    }

    /// The stored state of `principal`'s MCP session `id`.
    pub(crate) fn mcp_session(
        &self,
        principal: &str,
        id: &str,
    ) -> Result<Option<String>, StoreError> {
        let mut conn = self.conn()?;
        Ok(conn
            .query_opt(
                "UPDATE mess_mcp_sessions SET updated = now() WHERE principal = $1 AND id = $2 \
                 RETURNING state",
                &[&principal, &id],
            )
            .map_err(sorted)?
            .map(|r| r.get(0)))
    }

    /// Stores the state of `principal`'s MCP session `id`, and forgets sessions nobody used
    /// for a week and all but the principal's [`SESSIONS_KEPT`] most recent (a key holder
    /// opening sessions without end cannot fill the database).
    pub(crate) fn save_mcp_session(
        &self,
        principal: &str,
        id: &str,
        state: &str,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn()?;
        conn.execute(
            "INSERT INTO mess_mcp_sessions (principal, id, state) VALUES ($1, $2, $3) \
             ON CONFLICT (principal, id) DO UPDATE SET state = EXCLUDED.state, updated = now()",
            &[&principal, &id, &state],
        )
        .map_err(sorted)?;
        conn.execute(
            "DELETE FROM mess_mcp_sessions WHERE updated < now() - interval '7 days' \
             OR (principal = $1 AND id NOT IN (SELECT id FROM mess_mcp_sessions \
                 WHERE principal = $1 ORDER BY updated DESC LIMIT $2))",
            &[&principal, &SESSIONS_KEPT],
        )
        .map_err(sorted)?;
        Ok(())
    }

    /// Forgets `principal`'s MCP session `id`.
    pub(crate) fn drop_mcp_session(&self, principal: &str, id: &str) -> Result<(), StoreError> {
        let mut conn = self.conn()?;
        conn.execute(
            "DELETE FROM mess_mcp_sessions WHERE principal = $1 AND id = $2",
            &[&principal, &id],
        )
        .map_err(sorted)?;
        Ok(())
    }
}

/// Inserts `record` through `conn` (a session or an import's transaction) unless a key with its
/// hash is there; whether it was inserted.
pub(crate) fn insert_key_record(
    conn: &mut impl Run,
    record: &KeyRecord,
) -> Result<bool, StoreError> {
    let added = conn
        .execute(
            "INSERT INTO mess_keys (hash, principal, role, created, callback) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (hash) DO NOTHING",
            &[
                &record.hash,
                &record.principal,
                &record.role,
                &record.created,
                &record.callback,
            ],
        )
        .map_err(sorted)?;
    Ok(added > 0)
}
