//! The database schema of tier 1 as numbered migrations, applied in order under a lock, each in
//! its own transaction, and recorded in `mess_schema`; `mess db status` reports where a
//! database stands.

use crate::store::error::StoreError;
use crate::store::postgres::{Pg, Run as _, lock_key, sorted};

/// One step of the schema.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Its number: migrations run in this order, each once.
    pub version: i32,
    /// What it does, in a few words.
    pub name: &'static str,
    sql: &'static str,
}

/// Every migration this build knows, in order.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "threads, append-only messages, indexes, ref counters, change feed, keys, secrets, \
               registrations, outbox, short links, MCP sessions",
        sql: V1,
    },
    Migration {
        version: 2,
        name: "agent mail",
        sql: V2,
    },
    Migration {
        version: 3,
        name: "change feed pruning",
        sql: V3,
    },
    Migration {
        version: 4,
        name: "notices by thread",
        sql: V4,
    },
    Migration {
        version: 5,
        name: "agent key callbacks",
        sql: V5,
    },
    Migration {
        version: 6,
        name: "shells ledger",
        sql: V6,
    },
];

/// Thread history is append-only in the database itself: a trigger refuses every UPDATE,
/// DELETE and TRUNCATE of `mess_messages`, whoever connects.
const V1: &str = r"
CREATE TABLE mess_threads (
    ref      text PRIMARY KEY,
    head     text    NOT NULL,
    seq      integer NOT NULL,
    status   text    NOT NULL,
    state    text    NOT NULL,
    archive  text,
    updated  text    NOT NULL,
    bytes    bigint  NOT NULL
);
CREATE INDEX mess_threads_state ON mess_threads (state) WHERE archive IS NULL;

CREATE TABLE mess_messages (
    ref  text    NOT NULL REFERENCES mess_threads (ref),
    seq  integer NOT NULL,
    doc  text    NOT NULL,
    PRIMARY KEY (ref, seq)
);

CREATE FUNCTION mess_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'thread history is append-only: % on % refused', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER mess_messages_append_only BEFORE UPDATE OR DELETE ON mess_messages
    FOR EACH ROW EXECUTE FUNCTION mess_refuse_change();
CREATE TRIGGER mess_messages_no_truncate BEFORE TRUNCATE ON mess_messages
    FOR EACH STATEMENT EXECUTE FUNCTION mess_refuse_change();

CREATE TABLE mess_index (
    sender text NOT NULL,
    key    text NOT NULL,
    ref    text NOT NULL,
    PRIMARY KEY (sender, key)
);

CREATE TABLE mess_dependents (
    dependency text NOT NULL,
    dependent  text NOT NULL,
    PRIMARY KEY (dependency, dependent)
);

CREATE TABLE mess_ref_days (
    day  date   PRIMARY KEY,
    last bigint NOT NULL
);

CREATE TABLE mess_changes (
    id  bigserial PRIMARY KEY,
    xid xid8        NOT NULL DEFAULT pg_current_xact_id(),
    ref text        NOT NULL,
    seq integer     NOT NULL,
    at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX mess_changes_xid ON mess_changes (xid);

CREATE TABLE mess_keys (
    hash      text PRIMARY KEY,
    principal text NOT NULL,
    role      text NOT NULL,
    created   text NOT NULL,
    seq       bigserial UNIQUE
);

CREATE TABLE mess_secrets (
    name  text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE mess_outbox (
    id           text PRIMARY KEY,
    shelf        text        NOT NULL,
    doc          text        NOT NULL,
    due          timestamptz NOT NULL,
    written      timestamptz NOT NULL DEFAULT now(),
    locked_by    text,
    locked_until timestamptz
);
CREATE INDEX mess_outbox_queue ON mess_outbox (due) WHERE shelf = 'queue';
CREATE INDEX mess_outbox_shelf ON mess_outbox (shelf, id);

CREATE TABLE mess_short_links (
    code  text PRIMARY KEY,
    token text   NOT NULL,
    exp   bigint NOT NULL
);

CREATE TABLE mess_mcp_sessions (
    principal text NOT NULL,
    id        text NOT NULL,
    state     text NOT NULL,
    updated   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (principal, id)
);

CREATE SEQUENCE mess_registry_version;
CREATE TABLE mess_registry (
    name    text PRIMARY KEY,
    doc     text   NOT NULL,
    version bigint NOT NULL DEFAULT nextval('mess_registry_version')
);
";

/// Agent mail: one row per message, named as its file would be, holding the file's exact text;
/// `folder` is where the message is (claiming one is an update of `unread` rows only, so one
/// reader wins), and readers' records of `__broadcast` messages have their own table. `written`
/// and `expires` (seconds since 1970) are the letter's, so pruning needs no parsing; `version`
/// tells the nodes' mirrors that mail changed.
const V2: &str = r"
CREATE SEQUENCE mess_mail_version;
CREATE TABLE mess_mail (
    mailbox text   NOT NULL,
    file    text   NOT NULL,
    folder  text   NOT NULL CHECK (folder IN ('unread', 'read', 'archive')),
    sender  text   NOT NULL,
    doc     text   NOT NULL,
    written bigint NOT NULL,
    expires bigint,
    version bigint NOT NULL DEFAULT nextval('mess_mail_version'),
    PRIMARY KEY (mailbox, file)
);
CREATE INDEX mess_mail_folder ON mess_mail (mailbox, folder, file);

CREATE TABLE mess_mail_reads (
    mailbox text   NOT NULL,
    file    text   NOT NULL,
    reader  text   NOT NULL,
    doc     text   NOT NULL,
    written bigint NOT NULL,
    expires bigint,
    version bigint NOT NULL DEFAULT nextval('mess_mail_version'),
    PRIMARY KEY (mailbox, reader, file)
);
";

/// The change feed keeps a week (`mirror::FEED_KEEP_DAYS`); `mess_feed_floor` holds the newest
/// transaction id pruned, so a follower or an `/events` cursor older than that knows it missed
/// changes and starts over.
const V3: &str = r"
CREATE INDEX mess_changes_at ON mess_changes (at);
CREATE TABLE mess_feed_floor (
    id  boolean PRIMARY KEY DEFAULT true CHECK (id),
    xid bigint  NOT NULL
);
";

/// A delivery's id starts with its thread's ref and a dot: the notices of the threads that
/// just changed are found without reading the whole shelf.
const V4: &str = r"
CREATE INDEX mess_outbox_thread ON mess_outbox (shelf, split_part(id, '.', 1));
";

/// An agent key may name where its requests report their changes.
const V5: &str = "ALTER TABLE mess_keys ADD COLUMN callback text;";

/// The shells ledger: one row per movement, recorded once by its id, append-only like thread
/// history; `doc` is the movement's YAML document as tier 0 writes it in `ledger/YYYY-MM.yaml`.
const V6: &str = r"
CREATE TABLE mess_ledger (
    seq       bigserial PRIMARY KEY,
    id        text   NOT NULL UNIQUE,
    month     text   NOT NULL,
    from_acct text   NOT NULL,
    to_acct   text   NOT NULL,
    shells    bigint NOT NULL CHECK (shells > 0),
    doc       text   NOT NULL
);
CREATE FUNCTION mess_refuse_ledger_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the shells ledger is append-only: % on % refused', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER mess_ledger_append_only BEFORE UPDATE OR DELETE ON mess_ledger
    FOR EACH ROW EXECUTE FUNCTION mess_refuse_ledger_change();
CREATE TRIGGER mess_ledger_no_truncate BEFORE TRUNCATE ON mess_ledger
    FOR EACH STATEMENT EXECUTE FUNCTION mess_refuse_ledger_change();
";

/// Where a database stands.
#[derive(Debug, Clone)]
pub struct SchemaStatus {
    /// Versions applied, with their names and when.
    pub applied: Vec<(i32, String, String)>,
    /// The newest version this build knows.
    pub known: i32,
    /// Threads in the database (0 before the first migration).
    pub threads: i64,
}

impl SchemaStatus {
    /// The newest applied version (0 for an empty database).
    pub fn version(&self) -> i32 {
        self.applied.last().map_or(0, |a| a.0)
    }
}

/// The newest version this build knows.
pub fn latest() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

impl Pg {
    /// Applies every migration the database lacks, in order, each in one transaction, under
    /// an advisory lock so that nodes starting together migrate once. Returns the versions
    /// applied now.
    pub fn migrate(&self) -> Result<Vec<i32>, StoreError> {
        let mut conn = self.conn()?;
        let mut tx = conn.transaction().map_err(sorted)?;
        tx.execute(
            "SELECT pg_advisory_xact_lock($1)",
            &[&lock_key("schema:migrate")],
        )
        .map_err(sorted)?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS mess_schema (
                version    integer PRIMARY KEY,
                name       text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )",
        )
        .map_err(sorted)?;
        let have: Vec<i32> = tx
            .query("SELECT version FROM mess_schema", &[])
            .map_err(sorted)?
            .iter()
            .map(|r| r.get(0))
            .collect();
        if let Some(newer) = have.iter().find(|v| **v > latest()) {
            return Err(StoreError::Other {
                message: format!(
                    "the database has schema version {newer}, newer than this mess knows ({}); \
                     upgrade mess on this node",
                    latest()
                ),
            });
        }
        let mut applied = Vec::new();
        for m in MIGRATIONS.iter().filter(|m| !have.contains(&m.version)) {
            tx.batch_execute(m.sql).map_err(|e| StoreError::Other {
                message: format!(
                    "migration {} ({}) failed: {}",
                    m.version,
                    m.name,
                    e.as_db_error()
                        .map_or_else(|| e.to_string(), |d| d.message().to_owned())
                ),
            })?;
            tx.execute(
                "INSERT INTO mess_schema (version, name) VALUES ($1, $2)",
                &[&m.version, &m.name],
            )
            .map_err(sorted)?;
            applied.push(m.version);
        }
        tx.commit().map_err(sorted)?;
        Ok(applied)
    }

    /// Where the database stands, without changing it.
    pub fn schema_status(&self) -> Result<SchemaStatus, StoreError> {
        let mut conn = self.conn()?;
        let exists: bool = conn
            .query_one("SELECT to_regclass('mess_schema') IS NOT NULL", &[])
            .map_err(sorted)?
            .get(0);
        let applied = if exists {
            conn.query(
                "SELECT version, name, to_char(applied_at AT TIME ZONE 'UTC', \
                 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') FROM mess_schema ORDER BY version",
                &[],
            )
            .map_err(sorted)?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect()
        } else {
            Vec::new()
        };
        let threads = if applied.is_empty() {
            0
        } else {
            conn.query_one("SELECT count(*) FROM mess_threads", &[])
                .map_err(sorted)?
                .get(0)
        };
        Ok(SchemaStatus {
            applied,
            known: latest(),
            threads,
        })
    }

    /// Fails unless the database has exactly the schema this build knows: a node never runs
    /// on a schema it was not written for.
    pub fn check_schema(&self) -> Result<(), StoreError> {
        let status = self.schema_status()?;
        let missing: Vec<i32> = MIGRATIONS
            .iter()
            .map(|m| m.version)
            .filter(|v| !status.applied.iter().any(|a| a.0 == *v))
            .collect();
        match status.version() {
            v if v == status.known && missing.is_empty() => Ok(()),
            v if v == status.known => Err(StoreError::Other {
                message: format!(
                    "the database lacks migration(s) {missing:?} of this mess; run `mess db migrate`"
                ),
            }),
            0 => Err(StoreError::Other {
                message: "the database has no mess schema yet; run `mess db init`".to_owned(),
            }),
            v if v < status.known => Err(StoreError::Other {
                message: format!(
                    "the database has schema version {v}, this mess needs {}; run `mess db migrate`",
                    status.known
                ),
            }),
            v => Err(StoreError::Other {
                message: format!(
                    "the database has schema version {v}, newer than this mess knows ({}); \
                     upgrade mess on this node",
                    status.known
                ),
            }),
        }
    }
}
